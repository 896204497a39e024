"""Endpoint answers on the wire, from a real ``sluice serve`` (uvicorn). A request to an endpoint
is taken straight off uvicorn's parser (``api/connections.DirectCycle``, issue 29) and answered
in one write, or goes through uvicorn's ASGI cycle where the protocol does not take it
(pipelined behind an unanswered one, ``Expect: 100-continue``, ``HEAD``, HTTP/1.0, a chunked
body or one over ``DIRECT_MAX_BODY``). The tests' in-process ASGI client takes neither path,
so both are checked here over raw sockets, answers byte for byte, and every request answered
200 stored as one event.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import IO, Any

import httpx
import pytest

from tests.ui.conftest import Server, run_cli, serve

EMITTER = (
    'export default { name: "Answers", version: "0.0.1", props: { http: "$.interface.http" },'
    " async run(event) { this.$emit(event.body); } };"
)
#: Answers itself: 201, its own headers, the body it got back.
RESPONDER = (
    'export default { name: "Responder", version: "0.0.1",'
    ' props: { http: { type: "$.interface.http", customResponse: true } },'
    " async run(event) { this.$emit(event.body); await this.http.respond({ status: 201,"
    ' headers: { "X-Made": "here", "X-Many": ["a", "b"], "Set-Cookie": "c=1" },'
    " body: { got: event.body } }); } };"
)
#: Every header of the default answer, uvicorn's ``date`` and ``server`` with it.
DEFAULT_HEADERS = {
    "date",
    "server",
    "content-type",
    "access-control-allow-origin",
    "content-length",
}


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    """The server, a source's endpoint path, and the source's id (with its account's key)."""
    with serve(tmp_path_factory.mktemp("answers")) as running:
        made = run_cli(
            "accounts", "create", "--name", "ans", "--email", "ans@example.com",
            data_dir=running.data_dir,
        )  # fmt: skip
        key = json.loads(made.stdout)["api_key"]
        source = _deploy(running, key, EMITTER, "answers")
        yield running, _path(source), f"{source['id']} {key}"


@pytest.fixture(scope="module")
def responder(endpoint: tuple[Server, str, str]) -> str:
    """The endpoint path of a source that answers itself (``RESPONDER``)."""
    server, _, source = endpoint
    return _path(_deploy(server, source.split()[1], RESPONDER, "responder"))


def _deploy(server: Server, key: str, code: str, name: str) -> dict[str, Any]:
    created = httpx.post(
        server.url + "/v1/sources",
        headers={"Authorization": f"Bearer {key}"},
        json={"component_code": code, "name": name},
        timeout=120,
    )
    assert created.status_code in (200, 201), created.text
    source: dict[str, Any] = created.json()["data"]
    return source


def _path(source: dict[str, Any]) -> str:
    """The source's endpoint as a path (``/e/<id>``)."""
    return "/e/" + str(source["endpoint_url"]).rsplit("/", 1)[1]


def _connect(server: Server) -> tuple[socket.socket, IO[bytes]]:
    host, port = server.url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    return conn, conn.makefile("rb")


def _post(path: str, n: int, extra: str = "") -> bytes:
    body = json.dumps({"n": n}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def _answer(
    reader: IO[bytes], *, head_only: bool = False, repeats: bool = False
) -> tuple[bytes, dict[str, str], bytes]:
    """One answer: its status line, headers (names lowercased; a repeated one's values joined
    with ", " where ``repeats``, else refused) and body."""
    status = reader.readline()
    headers: dict[str, str] = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        name = name.lower()
        assert repeats or name not in headers, f"{name} twice"
        headers[name] = ", ".join(filter(None, (headers.get(name), value.strip())))
    body = b"" if head_only else reader.read(int(headers.get("content-length", "0")))
    return status, headers, body


def _is_default(answer: tuple[bytes, dict[str, str], bytes]) -> None:
    status, headers, body = answer
    assert status == b"HTTP/1.1 200 OK\r\n"
    assert set(headers) == DEFAULT_HEADERS, headers
    assert headers["content-type"] == "application/json"
    assert headers["access-control-allow-origin"] == "*"
    assert headers["content-length"] == "16"
    assert body == b'{"success":true}'


def _stored(server: Server, source: str, wanted: set[int]) -> list[int]:
    """The ``n`` of every event the source emitted, once those ``wanted`` are all stored
    (bounded: then what there is). ``HEAD``'s event has no body, so no ``n``."""
    source_id, key = source.split()
    deadline = time.monotonic() + 60
    while True:
        page = httpx.get(
            f"{server.url}/v1/sources/{source_id}/event_summaries",
            params={"expand": "event", "limit": 100},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        ).json()
        numbers = [
            item["event"]["n"]
            for item in page["data"]
            if isinstance(item.get("event"), dict) and "n" in item["event"]
        ]
        if wanted <= set(numbers) or time.monotonic() > deadline:
            return sorted(numbers)
        time.sleep(0.1)


def test_kept_alive_pipelined_and_continued_requests_get_the_whole_default_answer(
    endpoint: tuple[Server, str, str],
) -> None:
    server, path, source = endpoint
    conn, reader = _connect(server)
    with conn, reader:
        for n in range(3):  # one after another on one connection
            conn.sendall(_post(path, n))
            _is_default(_answer(reader))
        conn.sendall(b"".join(_post(path, n) for n in range(3, 8)))  # pipelined
        for _ in range(3, 8):
            _is_default(_answer(reader))
        # Expect: 100-continue: the body is sent only after the interim answer.
        head, _, body = _post(path, 8, "Expect: 100-continue\r\n").partition(b"\r\n\r\n")
        conn.sendall(head + b"\r\n\r\n")
        assert reader.readline() == b"HTTP/1.1 100 Continue\r\n"
        assert reader.readline() == b"\r\n"
        conn.sendall(body)
        _is_default(_answer(reader))
    stored = _stored(server, source, set(range(9)))
    assert [stored.count(n) for n in range(9)] == [1] * 9, stored


def test_head_and_a_connection_to_close_are_answered_by_uvicorn_alike(
    endpoint: tuple[Server, str, str],
) -> None:
    server, path, source = endpoint
    conn, reader = _connect(server)
    with conn, reader:
        conn.sendall(f"HEAD {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        status, headers, _ = _answer(reader, head_only=True)
        assert status == b"HTTP/1.1 200 OK\r\n"
        assert set(headers) == DEFAULT_HEADERS and headers["content-length"] == "16"
        # No body came after HEAD's head: the next answer on the connection starts clean.
        conn.sendall(_post(path, 100))
        _is_default(_answer(reader))
        conn.sendall(_post(path, 101, "Connection: close\r\n"))
        status, headers, body = _answer(reader)
        assert status == b"HTTP/1.1 200 OK\r\n" and body == b'{"success":true}'
        assert headers["connection"] == "close"
        assert reader.read() == b""  # the server closed it
    stored = _stored(server, source, {100, 101})
    assert stored.count(100) == 1 and stored.count(101) == 1, stored


def _raw(server: Server, request: bytes) -> tuple[bytes, dict[str, str], bytes]:
    conn, reader = _connect(server)
    with conn, reader:
        conn.sendall(request)
        return _answer(reader)


def test_an_answer_of_the_source_its_headers_and_a_refusal_go_out_whole(
    endpoint: tuple[Server, str, str], responder: str
) -> None:
    server, path, _source = endpoint
    conn, reader = _connect(server)
    with conn, reader:
        conn.sendall(_post(responder, 7))
        status, headers, body = _answer(reader, repeats=True)
        assert status == b"HTTP/1.1 201 Created\r\n"
        assert headers["x-made"] == "here" and headers["x-many"] == "a, b"  # given twice
        assert "set-cookie" not in headers  # /e/<id> is a shared origin (endpoint_origins)
        assert headers["content-length"] == str(len(body))
        assert json.loads(body) == {"got": {"n": 7}}
        # Unknown endpoint: the API's error shape, and the connection stays usable.
        conn.sendall(_post("/e/dc_doesnotexist", 1))
        status, headers, body = _answer(reader)
        assert status == b"HTTP/1.1 404 Not Found\r\n"
        assert json.loads(body)["code"] == "not_found", body
        conn.sendall(f"OPTIONS {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        status, headers, body = _answer(reader)
        assert status == b"HTTP/1.1 204 No Content\r\n" and body == b""
        assert headers["access-control-allow-methods"].startswith("GET")
        assert "content-length" not in headers
        conn.sendall(_post(path, 300))  # still in step after the answer without a body
        _is_default(_answer(reader))


def test_a_large_a_chunked_and_an_http_1_0_request_go_the_asgi_way_and_are_stored(
    endpoint: tuple[Server, str, str],
) -> None:
    server, path, source = endpoint
    large = json.dumps({"n": 200, "pad": "x" * (64 * 1024)}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(large)}\r\n\r\n"
    )
    _is_default(_raw(server, head.encode() + large))
    body = json.dumps({"n": 201}).encode()
    chunked = (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    _is_default(_raw(server, chunked))
    old = _post(path, 202).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    conn, reader = _connect(server)
    with conn, reader:
        conn.sendall(old)
        status, _headers, body = _answer(reader)
        assert status == b"HTTP/1.1 200 OK\r\n" and body == b'{"success":true}'
        assert reader.read() == b""  # HTTP/1.0 without keep-alive: closed after the answer
    stored = _stored(server, source, {200, 201, 202})
    assert [stored.count(n) for n in (200, 201, 202)] == [1, 1, 1], stored


def test_a_body_at_the_direct_limit_is_read_whole(endpoint: tuple[Server, str, str]) -> None:
    server, path, source = endpoint
    prefix = b'{"n": 203, "pad": "'
    body = prefix + b"y" * (64 * 1024 - len(prefix) - 2) + b'"}'
    assert len(body) == 64 * 1024
    head = (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    conn, reader = _connect(server)
    with conn, reader:
        conn.sendall(head.encode())
        for at in range(0, len(body), 5000):  # in pieces, as a slow client sends it
            conn.sendall(body[at : at + 5000])
        _is_default(_answer(reader))
    assert _stored(server, source, {203}).count(203) == 1
