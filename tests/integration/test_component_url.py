"""component_url: http(s) only, public addresses only (unless allowed), bounded size."""

from __future__ import annotations

import dataclasses
import http.server
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from sluice import errors
from sluice.domain import egress
from sluice.engine.components import fetch
from sluice.platform import Platform
from tests.conftest import Api, account_client
from tests.integration.test_api_basics import assert_error

CODE = 'export default { name: "Fetched", version: "1", async run() { this.$emit(1); } };\n'


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/c.mjs")
            self.end_headers()
            return
        body = (CODE if self.path == "/c.mjs" else "x" * 5000).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def test_loopback_is_refused_through_the_api(api: Api, server: str) -> None:
    body = assert_error(
        await api.client.post("/v1/components", json={"component_url": f"{server}/c.mjs"}),
        400,
        "fetch_failed",
    )
    assert "127.0.0.1 is a loopback address" in body["error"]
    assert "SLUICE_EGRESS_ALLOW can allow it" in body["error"] and body["field"] == "component_url"
    body = assert_error(
        await api.client.post("/v1/components", json={"component_url": "file:///etc/passwd"}),
        400,
        "fetch_failed",
    )
    assert "http(s)" in body["error"]


LOOPBACK = egress.EgressPolicy.parse("127.0.0.1:*")


async def test_allowed_hosts_are_fetched_with_limits(server: str) -> None:
    text = await fetch.fetch_text(
        f"{server}/c.mjs", time_limit=5, max_bytes=10_000, policy=LOOPBACK
    )
    assert text == CODE
    assert (
        await fetch.fetch_text(
            f"{server}/redirect", time_limit=5, max_bytes=10_000, policy=LOOPBACK
        )
        == CODE
    )
    with pytest.raises(errors.PayloadTooLarge):
        await fetch.fetch_text(f"{server}/big", time_limit=5, max_bytes=1000, policy=LOOPBACK)
    with pytest.raises(errors.FetchFailed, match="a loopback address"):
        await fetch.fetch_text(f"{server}/c.mjs", time_limit=5, max_bytes=1000)


def test_github_blob_urls_read_the_raw_file() -> None:
    assert (
        fetch.raw_url("https://github.com/o/r/blob/main/components/x.mjs")
        == "https://raw.githubusercontent.com/o/r/main/components/x.mjs"
    )


#: Shaped like Pipedream's own REST example, components/rss/sources/new-item-in-feed: the
#: entry imports the app file and a common module by relative path.
TREE = {
    "/pd/components/rss/sources/new-item-in-feed/new-item-in-feed.mjs": """
import rss from "../../rss.app.mjs";
import base from "../common/common.mjs";
export default {
  ...base, key: "rss-new-item-in-feed", name: "New Item in Feed", version: "1.0.0",
  type: "source", props: { rss, url: { type: "string", label: "Feed URL" } },
  async run() { this.$emit({ kind: this.kind(), app: this.rss.app }); },
};
""",
    "/pd/components/rss/rss.app.mjs": """
import { label } from "./common/labels.mjs?v=1";
export default { type: "app", app: "rss", propDefinitions: {}, methods: { label } };
""",
    "/pd/components/rss/common/labels.mjs": "export const label = () => 'rss';\n",
    "/pd/components/rss/sources/common/common.mjs": """
export default { methods: { kind() { return "feed"; } } };
""",
    "/pd/broken/entry.mjs": 'import x from "./missing.mjs";\nexport default x;\n',
}


class _TreeHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.startswith("/chain/"):  # /chain/N.mjs imports ./N+1.mjs, without end
            n = int(path.removeprefix("/chain/").removesuffix(".mjs"))
            text = f'import "./{n + 1}.mjs";\n' + "//" + "x" * 100 + "\n"
        elif path in TREE:
            text = TREE[path]
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def tree() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TreeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest_asyncio.fixture(loop_scope="session")
async def fetching(platform: Platform, tree: str) -> AsyncIterator[Api]:
    """An account on a platform whose egress allows the tree's server."""
    port = tree.rsplit(":", 1)[1]
    settings = dataclasses.replace(platform.settings, egress_allow=f"127.0.0.1:{port}")
    async with (
        Platform.open(settings, background=False) as opened,
        account_client(opened, "fetcher") as api,
    ):
        yield api


async def test_a_component_url_brings_its_relative_imports(fetching: Api, tree: str) -> None:
    url = f"{tree}/pd/components/rss/sources/new-item-in-feed/new-item-in-feed.mjs"
    saved = await fetching.client.post("/v1/components", json={"component_url": url})
    assert saved.status_code == 200, saved.text
    data = saved.json()["data"]
    assert data["entry_path"] == "sources/new-item-in-feed/new-item-in-feed.mjs", data
    assert data["component_url"] == url
    deployed = await fetching.client.post(
        "/v1/sources",
        json={"component_id": data["id"], "configured_props": {"url": "https://f.example/x"}},
    )
    assert deployed.status_code == 200, deployed.text
    ran = await fetching.client.post(f"/v1/sources/{deployed.json()['data']['id']}/run")
    assert ran.json()["data"]["ok"], ran.text


async def test_fetching_imports_is_bounded_and_names_no_server_path(
    fetching: Api, tree: str
) -> None:
    broken = assert_error(
        await fetching.client.post(
            "/v1/components", json={"component_url": f"{tree}/pd/broken/entry.mjs"}
        ),
        400,
        "fetch_failed",
    )
    assert (
        "answered 404" in broken["error"] and "imported by /pd/broken/entry.mjs" in broken["error"]
    ), broken
    endless = assert_error(
        await fetching.client.post("/v1/components", json={"component_url": f"{tree}/chain/0.mjs"}),
        400,
        "fetch_failed",
    )
    assert f"more than {fetch.MAX_FILES} files" in endless["error"], endless
    policy = egress.EgressPolicy.parse(f"127.0.0.1:{tree.rsplit(':', 1)[1]}")
    with pytest.raises(errors.PayloadTooLarge, match="the files it imports are over 1000 bytes"):
        await fetch.fetch_component(
            f"{tree}/chain/0.mjs", time_limit=5, max_bytes=1000, policy=policy
        )
    # A relative import going above the tree, missing at load: the error shows it as written,
    # never the server's directories.
    code = 'import x from "../../../nope.mjs";\nexport default x;\n'
    failed = assert_error(
        await fetching.client.post(
            "/v1/components", json={"component_code": code, "component_path": "sources/a/a.mjs"}
        ),
        400,
        "component_load_failed",
    )
    data_dir = str(fetching.platform.settings.data_dir)
    assert "nope.mjs" in failed["error"] and data_dir not in failed["error"], failed
    assert "/tmp/" not in failed["error"] and "/work/" not in failed["error"], failed
