"""component_url: http(s) only, public addresses only (unless allowed), bounded size."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from sluice import errors
from sluice.domain import egress
from sluice.engine import fetch
from tests.conftest import Api
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
