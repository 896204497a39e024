"""Idle connections cannot starve other clients (issue 25): a real ``sluice serve`` with the
common soft limit of 1,024 descriptors, 2,000 connections from one address that send nothing,
then another client's ``GET /v1/users/me`` (from 127.0.0.2, loopback too). Before issue 25 the
server took every idle connection until it ran out of descriptors, and the other client's
request was never accepted (measured with 19,970 connections: connection reset).
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ui.conftest import Server, run_cli, serve

IDLE = 2000
#: The server's descriptors: the usual default soft limit (``ulimit -n``).
SERVER_FILES = 1024
HEAD_TIMEOUT_S = 2
BODY_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    env = {
        "SLUICE_HTTP_HEAD_TIMEOUT_SECONDS": str(HEAD_TIMEOUT_S),
        "SLUICE_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT_S),
    }
    with serve(tmp_path_factory.mktemp("conns"), env) as running:
        made = run_cli(
            "accounts", "create", "--name", "victim", "--email", "victim@example.com",
            data_dir=running.data_dir,
        )  # fmt: skip
        resource.prlimit(running.pid, resource.RLIMIT_NOFILE, (SERVER_FILES, SERVER_FILES))
        yield running, json.loads(made.stdout)["api_key"]


@contextlib.contextmanager
def _idle_connections(url: str, count: int) -> Iterator[list[socket.socket]]:
    host, port = url.removeprefix("http://").split(":")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 1024)), hard))
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            opened.append(socket.create_connection((host, int(port)), timeout=10))
        yield opened
    finally:
        for s in opened:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _closed_by_server(s: socket.socket, bound_s: float) -> bool:
    s.settimeout(bound_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_connections_from_one_address_do_not_starve_another_client(
    server: tuple[Server, str], tmp_path: Path
) -> None:
    running, key = server
    with _idle_connections(running.url, IDLE) as idle:
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=15) as other:
            me = other.get(running.url + "/v1/users/me", headers={"Authorization": f"Bearer {key}"})
        assert me.status_code == 200, me.text
        # The idle ones the server kept (under the per-client cap) end at the head time-out.
        assert _closed_by_server(idle[0], HEAD_TIMEOUT_S + 10)


def test_a_request_head_that_never_ends_is_cut_off(server: tuple[Server, str]) -> None:
    running, _ = server
    host, port = running.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as slow:
        slow.sendall(b"GET /v1/users/me HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert _closed_by_server(slow, HEAD_TIMEOUT_S + 10)
    # A whole head is answered as always.
    with socket.create_connection((host, int(port)), timeout=10) as fine:
        fine.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert fine.recv(64).startswith(b"HTTP/1.1 200 ")


def test_a_body_trickled_in_is_cut_off(server: tuple[Server, str]) -> None:
    """A client that sends a whole head, then its body a byte a second, held the connection
    (and the request's handler) for as long as it liked: seen on the old code, the connection
    still open after 20 s. Now it is closed once the body falls behind the minimum rate: the
    grace of ``SLUICE_HTTP_BODY_TIMEOUT_SECONDS`` plus a second per 4,096 bytes."""
    running, key = server
    host, port = running.url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/workflows HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as slow:
        slow.sendall(head)
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < BODY_TIMEOUT_S + 18:
            try:
                slow.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = _closed_by_server(slow, 1.0)  # a byte a second: the pace of the attack
        held = time.monotonic() - started
    assert closed, f"the connection was still open after {held:.0f} s"
    assert held < BODY_TIMEOUT_S + 5, held
    # A body sent at once is served as always.
    body = b'{"name": "fine"}'
    with httpx.Client(timeout=10) as client:
        made = client.post(
            running.url + "/v1/workflows",
            content=body,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
    assert made.status_code < 500, made.text
