"""Endpoints and the web UI's origin, in a real browser (issue 25): one account's endpoint must
not reach another's visitors or the UI's session through the cookies of a shared origin, and
on per-endpoint hosts (``SLUICE_ENDPOINT_BASE_URL=http://{id}.hooks.sluice.localhost:<port>/``)
each endpoint's cookies stay its own while the UI and ``/v1`` are not served there at all.

A real ``sluice serve`` and Debian's Chromium. The UI is at ``http://sluice.localhost:<port>``:
Chromium maps ``*.localhost`` to loopback and holds it a secure context, so it obeys
``Clear-Site-Data`` there, and an endpoint on ``<id>.hooks.sluice.localhost`` can try a
``Domain=sluice.localhost`` cookie on the UI's host. Each test makes its own server and
accounts.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.ui.conftest import CHROMIUM, Server, create_owner, run_cli, serve

#: An attacker's endpoint: it answers with the cookies it was sent, and tries to set a cookie
#: for every visitor of the origin, a nameless one (``=sluice_session=…``, which some browsers
#: store as ``sluice_session``), one for the parent domain, and to clear the origin's data.
SETTER = """export default {
  name: "Cookie setter",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond({
      status: 200,
      // Apart: a browser drops the cookies of an answer that also clears them.
      headers: "clear" in event.query
        ? { "Clear-Site-Data": '"cookies"' }
        : {
            "Set-Cookie": [
              "app_session=from-attacker; Path=/",
              "=sluice_session=planted; Path=/",
              "wide=from-attacker; Path=/; Domain=sluice.localhost",
            ],
          },
      body: { cookie: event.headers.cookie ?? null },
    });
  },
};
"""

#: Another account's endpoint: it answers with the cookies it was sent.
ECHO = """export default {
  name: "Cookie echo",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond({ status: 200, body: { cookie: event.headers.cookie ?? null } });
  },
};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bin/test does it as root)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--host-resolver-rules=MAP *.localhost 127.0.0.1",
            ],
        )
        yield launched
        launched.close()


def _deploy(server: Server, code: str) -> str:
    """A new account's source of ``code``: its endpoint URL."""
    name = f"t{secrets.token_hex(4)}"
    made = run_cli(
        "accounts",
        "create",
        "--name",
        name,
        "--email",
        f"{name}@example.com",
        data_dir=server.data_dir,
    )
    key = json.loads(made.stdout)["api_key"]
    with httpx.Client(base_url=_loopback(server), timeout=120) as client:
        deployed = client.post(
            "/v1/sources",
            json={"component_code": code},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert deployed.status_code == 200, deployed.text
    return str(deployed.json()["data"]["endpoint_url"])


def _loopback(server: Server) -> str:
    """The server's URL for clients outside the browser."""
    return server.url.replace("sluice.localhost", "127.0.0.1")


def _cookie_seen(page: Page, url: str) -> object:
    answered = page.goto(url)
    assert answered is not None and answered.status == 200, url
    return answered.json()["cookie"]


def _signed_in(server: Server, browser: Browser) -> tuple[BrowserContext, Page, str]:
    """A browser signed in as the owner (made on the first-run page), and its session."""
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/")
    create_owner(page)
    [session] = [c["value"] for c in context.cookies() if c["name"] == "sluice_session"]
    return context, page, session


def test_on_the_uis_origin_no_cookie_reaches_or_leaves_an_endpoint(
    browser: Browser, tmp_path: Path
) -> None:
    """The default: endpoints at ``<public url>/e/<id>``, the UI's origin. Before issue 25 the
    attacker's ``app_session`` was stored and sent to the other account's endpoint, and its
    ``Clear-Site-Data`` signed the visitor out of the UI."""
    with serve(tmp_path, {"SLUICE_PUBLIC_URL": "http://sluice.localhost:{port}"}) as server:
        context, page, session = _signed_in(server, browser)
        attacker = _deploy(server, SETTER)
        other = _deploy(server, ECHO)
        assert attacker.startswith(f"{server.url}/e/")

        assert _cookie_seen(page, attacker + "?clear=1") is None  # not the session
        page.goto("/sources")  # still signed in
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()
        assert _cookie_seen(page, attacker) is None
        jar = {c["name"]: c["value"] for c in context.cookies()}
        assert jar == {"sluice_session": session}, jar  # nothing set, nothing cleared
        assert _cookie_seen(page, other) is None
        context.close()


def test_on_their_own_hosts_endpoints_keep_their_cookies_apart_from_each_other_and_the_ui(
    browser: Browser, tmp_path: Path
) -> None:
    """``SLUICE_ENDPOINT_BASE_URL`` with ``{id}`` in the host: each endpoint is an origin of
    its own, as Pipedream's ``<id>.m.pipedream.net``. Its cookies come back to it, never to
    another endpoint or to the UI; the UI and ``/v1`` refuse to serve on an endpoint host."""
    env = {
        "SLUICE_PUBLIC_URL": "http://sluice.localhost:{port}",
        "SLUICE_ENDPOINT_BASE_URL": "http://{id}.hooks.sluice.localhost:{port}/",
    }
    with serve(tmp_path, env) as server:
        context, page, session = _signed_in(server, browser)
        attacker = _deploy(server, SETTER)
        other = _deploy(server, ECHO)
        port = server.url.rsplit(":", 1)[1]
        assert attacker.endswith(f".hooks.sluice.localhost:{port}"), attacker
        assert attacker.startswith("http://") and "/e/" not in attacker

        assert _cookie_seen(page, attacker) is None
        # Its own host-only cookie comes back to it (its origin's to keep), and only that.
        assert _cookie_seen(page, attacker + "/?clear=1") == "app_session=from-attacker"
        assert _cookie_seen(page, attacker + "/again") == "app_session=from-attacker"
        assert _cookie_seen(page, other) is None
        ui = {c["name"]: c["value"] for c in context.cookies(server.url)}
        assert ui == {"sluice_session": session}, ui
        page.goto(f"{server.url}/sources")
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()

        # On an endpoint host, every path is the endpoint's: no page, no API, no session.
        for path in ("/v1/users/me", "/login", "/sources", "/static/app.css"):
            assert _cookie_seen(page, attacker + path) == "app_session=from-attacker", path
        with httpx.Client(timeout=60) as client:
            host = attacker.removeprefix("http://").split(":")[0]
            unknown = client.get(
                _loopback(server) + "/sources",
                headers={"Host": f"nosuch.hooks.sluice.localhost:{port}"},
            )
            assert unknown.status_code == 404 and "not_found" in unknown.text, unknown.text
            me = client.get(
                _loopback(server) + "/v1/users/me",
                headers={"Host": host, "Cookie": f"sluice_session={session}"},
            )
            assert me.json() == {"cookie": None}  # the endpoint's answer, not the account
        context.close()
