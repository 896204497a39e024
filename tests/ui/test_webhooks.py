"""Webhooks in the browser: a webhook whose deliveries died (the receiver failed and the
server gives up after one attempt here) shows them on its page; Retry sends one again, Retry
all the rest, and the receiver gets each with the Idempotency-Key it saw the first time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server, serve
from tests.ui.test_sources import api_key

EMITTER = """
export default { name: "Hooked", version: "1",
  async run(event) { this.$emit({ n: event.n }, { summary: "n" }); } };
"""


class Receiver(BaseHTTPRequestHandler):
    status = 503
    got: list[tuple[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((self.headers["Idempotency-Key"], json.loads(body)))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Deliveries die after their first failed attempt (no waiting for retries here)."""
    settings = {"SLUICE_DELIVERY_MAX_ATTEMPTS": "1"}
    with serve(tmp_path_factory.mktemp("ui-webhooks"), settings) as running:
        yield running


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/in"
    httpd.shutdown()
    httpd.server_close()


def _until(api: httpx.Client, path: str, status: str, count: int) -> list[dict[str, Any]]:
    """The server delivers on its own: poll (bounded) until ``count`` have ``status``."""
    deadline = time.monotonic() + 60
    while True:
        found: list[dict[str, Any]] = api.get(path, params={"status": status}).json()["data"]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} {status} deliveries, not {count}"
        time.sleep(0.1)


def test_dead_deliveries_are_retried_from_the_webhooks_page(
    page: Page, server: Server, receiver: str
) -> None:
    key = api_key(page, "hooks")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as api:
        hook = api.post("/v1/webhooks", params={"url": receiver, "name": "inbox"}).json()["data"]
        source = api.post("/v1/sources", json={"component_code": EMITTER}).json()["data"]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert api.post("/v1/subscriptions", params=link).status_code == 200
        for n in (1, 2):
            api.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
        path = f"/v1/webhooks/{hook['id']}/deliveries"
        dead = _until(api, path, "dead", 2)

        page.goto("/webhooks")
        expect(page.get_by_role("cell", name="2 dead")).to_be_visible()
        page.get_by_role("link", name="inbox").click()
        table = page.get_by_role("table", name="Dead deliveries")
        expect(table.locator("tbody tr")).to_have_count(2)
        expect(table).to_contain_text("the URL answered 503")

        Receiver.status = 200
        first, second = dead
        page.get_by_role("button", name=f"Retry {first['id']}").click()
        expect(table.locator("tbody tr")).to_have_count(1)
        expect(table).to_contain_text(second["id"])
        _until(api, path, "delivered", 1)
        page.get_by_role("button", name="Retry all 1").click()
        expect(page.get_by_text("No dead deliveries.")).to_be_visible()
        _until(api, path, "delivered", 2)

    keys = [k for k, _ in Receiver.got]
    assert sorted(keys) == sorted([first["id"], first["id"], second["id"], second["id"]])
    assert {body["n"] for _, body in Receiver.got} == {1, 2}
