"""`sluice webhooks` for real: a server process whose deliveries die after one failed attempt,
a receiver on 127.0.0.1 that fails, then answers; the CLI lists the dead delivery and retries
it, and the receiver gets it again with the same Idempotency-Key."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.test_cli import Cli, cli_server, one_line_error

EMITTER = """
export default { name: "Hooked", version: "1",
  async run(event) { this.$emit({ n: event.n }, { summary: "n" }); } };
"""


class Receiver(BaseHTTPRequestHandler):
    status = 500
    keys: list[tuple[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).keys.append((self.headers["Idempotency-Key"], json.loads(body)))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    settings = {"SLUICE_DELIVERY_MAX_ATTEMPTS": "1", "SLUICE_EGRESS_ALLOW": "127.0.0.1:*"}
    with cli_server(tmp_path_factory.mktemp("cli-webhooks"), settings) as cli:
        yield cli


def _until(check: Any, what: str, seconds: float = 60) -> Any:
    """The server works on its own clock: poll it (bounded) until ``check()`` is truthy."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} after {seconds} s"
        time.sleep(0.1)
    return found


def test_dead_deliveries_listed_and_retried(cli: Cli, receiver: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{receiver.server_address[1]}/in"
    hook = json.loads(cli.ok("webhooks", "create", url, "--name", "inbox", "--json"))
    assert hook["id"].startswith("wh_")
    listed = cli.ok("webhooks", "list")
    assert hook["id"] in listed and "inbox" in listed and url in listed
    source = cli.api.post("/v1/sources", json={"component_code": EMITTER}).json()["data"]
    cli.ok("subscriptions", "create", "--emitter", source["id"], "--listener", hook["id"])
    assert "No dead deliveries" in cli.ok("webhooks", "retry", hook["id"])

    Receiver.status = 500
    cli.api.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 5}})
    dead = _until(
        lambda: json.loads(cli.ok("webhooks", "deliveries", hook["id"], "--json")),
        "dead delivery",
    )
    [delivery] = dead
    assert delivery["status"] == "dead" and delivery["last_error"] == "the URL answered 500"
    table = cli.ok("webhooks", "deliveries", hook["id"])
    assert delivery["id"] in table and "dead" in table and "answered 500" in table

    Receiver.status = 200
    assert "Retrying 1 deliveries" in cli.ok("webhooks", "retry", hook["id"], delivery["id"])
    _until(
        lambda: json.loads(
            cli.ok("webhooks", "deliveries", hook["id"], "--status", "delivered", "--json")
        ),
        "delivered delivery",
    )
    assert Receiver.keys == [(delivery["id"], {"n": 5}), (delivery["id"], {"n": 5})]
    assert json.loads(cli.ok("webhooks", "deliveries", hook["id"], "--json")) == []
    one_line_error(cli.run("webhooks", "retry", hook["id"], delivery["id"]), "only a dead one")
    assert f"Deleted {hook['id']}" in cli.ok("webhooks", "delete", hook["id"])
    one_line_error(cli.run("webhooks", "deliveries", hook["id"]), "not found")
