"""The per-client connection count, and a response's writes (api/connections.py)."""

from __future__ import annotations

import asyncio
import contextlib
import doctest
import socket
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import uvicorn
from uvicorn.server import ServerState

from sluice import public_url
from sluice.api import connections
from tests.integration.test_sse import _Server


def test_doctests() -> None:
    assert doctest.testmod(connections).failed == 0


def test_trusted_proxies_are_not_capped_and_closed_connections_free_their_place() -> None:
    counts = connections.ClientCounts(2, public_url.TrustedProxies("10.0.0.0/8"))
    assert all(counts.admit("10.1.2.3") for _ in range(10))  # the proxy: every client's
    assert [counts.admit("192.0.2.1") for _ in range(3)] == [True, True, False]
    counts.release("192.0.2.1")
    assert counts.admit("192.0.2.1")
    unlimited = connections.ClientCounts(0, public_url.TrustedProxies(""))
    assert all(unlimited.admit("192.0.2.1") for _ in range(1000))


class _Socket(asyncio.Transport):
    """The kernel's side of a connection: what reached it, one entry a system call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[bytes]] = []
        self.closed = self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.calls.append([bytes(data)])

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self.calls.append([bytes(d) for d in list_of_data])

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0


async def test_a_responses_head_and_body_leave_in_one_write() -> None:
    kernel = _Socket()
    one = connections.OneWrite(kernel, asyncio.get_running_loop())
    one.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert kernel.calls == [] and one.get_write_buffer_size() == 38
    one.write(b"ok")
    assert kernel.calls == [[b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]]
    await asyncio.sleep(0)  # the turn's flush was cancelled: nothing more is written
    assert len(kernel.calls) == 1


async def test_a_lone_write_leaves_at_the_loops_next_turn() -> None:
    kernel = _Socket()
    one = connections.OneWrite(kernel, asyncio.get_running_loop())
    one.write(b"data: 1\n\n")  # a streamed chunk: no second write follows it
    await asyncio.sleep(0)
    assert kernel.calls == [[b"data: 1\n\n"]]


async def test_closing_sends_what_is_held_and_aborting_drops_it() -> None:
    kernel = _Socket()
    one = connections.OneWrite(kernel, asyncio.get_running_loop())
    one.write(b"last")
    one.close()
    assert kernel.calls == [[b"last"]] and kernel.closed
    await asyncio.sleep(0)
    assert kernel.calls == [[b"last"]]

    other = _Socket()
    one = connections.OneWrite(other, asyncio.get_running_loop())
    one.write(b"never")
    one.abort()
    await asyncio.sleep(0)
    assert other.calls == [] and other.aborted


async def test_a_large_body_is_not_copied_to_join_its_head() -> None:
    kernel = _Socket()
    one = connections.OneWrite(kernel, asyncio.get_running_loop())
    body = b"x" * (connections.OneWrite.COPY_AT_MOST + 1)
    one.write(b"head")
    one.write(body)
    assert kernel.calls == [[b"head", body]]  # one writelines: one vectored system call


async def test_a_real_server_answers_whole_and_streams_without_holding_back() -> None:
    """uvicorn with the guarded protocol: a plain answer, a HEAD, a closing connection, and a
    streamed answer whose first chunk reaches the client while the app still waits to send
    the second (nothing waits for a later write)."""
    first_seen = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"one;", "more_body": True})
            await asyncio.wait_for(first_seen.wait(), 10)
            await send({"type": "http.response.body", "body": b"two"})
            return
        body = b"hello"
        headers = [(b"content-length", b"5"), (b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
    async with _serving(
        app,
        log_level="warning",
        lifespan="off",
        http=connections.protocol(5.0, counts),
        timeout_keep_alive=60,  # a held write would wait for that close: the bounds below fail
    ) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(3):  # kept alive: each answer whole, the next one after it
                plain = await client.get(base + "/")
                assert (plain.status_code, plain.content) == (200, b"hello")
            head = await client.head(base + "/")
            assert head.status_code == 200 and head.content == b""
            closing = await client.get(base + "/", headers={"Connection": "close"})
            assert closing.content == b"hello"
            async with client.stream("GET", base + "/stream") as streamed:
                chunks = streamed.aiter_raw()
                assert await asyncio.wait_for(chunks.__anext__(), 10) == b"one;"
                first_seen.set()
                rest = asyncio.wait_for(_joined(chunks), 10)
                assert await rest == b"two"


@contextlib.asynccontextmanager
async def _serving(app: Any, **options: Any) -> AsyncIterator[int]:
    """uvicorn serving ``app`` on a port of 127.0.0.1 (yielded), with ``options``; stopped after.
    No signal handlers are taken from the test process (``_Server``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = _Server(uvicorn.Config(app, **options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await asyncio.wait_for(server.ready.wait(), 10)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _joined(chunks: Any) -> bytes:
    return b"".join([chunk async for chunk in chunks])


class _Direct:
    """Takes ``/d/…``: answers what it got (``/d/fail``: raises; ``/d/bad``: a header with a
    line break; ``/d/wait``: once ``release`` is set)."""

    def __init__(self) -> None:
        self.taken: list[tuple[str, str, bytes]] = []
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    def take(self, scope: dict[str, Any]) -> Any:
        if not scope["path"].startswith("/d/"):
            return None
        self.taken.append((scope["method"], scope["path"], scope["query_string"]))
        return self.handle

    async def handle(self, cycle: connections.DirectCycle) -> None:
        path = cycle.scope["path"]
        if path == "/d/fail":
            raise ValueError("boom")
        if path == "/d/wait":
            self.waiting.set()
            await self.release.wait()
        if path == "/d/bad":
            cycle.answer(200, [(b"x-bad", b"a\r\nb")], b"")
        cycle.answer(201, [(b"x-direct", b"yes")], b"direct:" + cycle.request_body())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI app: ``self`` in the lifespan state, and what the protocol does not take
        answered ``asgi:<path>:<body>``."""
        if scope["type"] == "lifespan":
            await receive()
            scope["state"][connections.DIRECT] = self
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        await _asgi(scope, receive, send)


async def _asgi(scope: Any, receive: Any, send: Any) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    out = b"asgi:" + scope["path"].encode() + b":" + body
    headers = [(b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


async def _read_answer(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status, *lines = head[:-4].split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in lines)
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return status, headers, body


def _request(path: str, body: bytes = b"", extra: str = "", method: str = "POST") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def test_requests_a_direct_takes_skip_the_asgi_cycle_and_the_rest_do_not() -> None:
    direct = _Direct()
    counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
    async with _serving(
        direct,
        log_level="critical",
        lifespan="on",
        access_log=False,  # as ``sluice serve``: with uvicorn's access log on, nothing is taken
        http=connections.protocol(5.0, counts, 5.0),
    ) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_request("/d/one?q=1", b"hi"))
        status, headers, body = await _read_answer(reader)
        assert (status, headers[b"x-direct"], body) == (
            b"HTTP/1.1 201 Created",
            b"yes",
            b"direct:hi",
        )
        assert headers[b"content-length"] == b"9" and b"date" in headers
        assert direct.taken == [("POST", "/d/one", b"q=1")]
        # Not taken: HEAD, Expect: 100-continue, a chunked body, one over the limit, and
        # anything the Direct declines.
        writer.write(_request("/d/h", method="HEAD"))
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 OK")
        writer.write(_request("/d/c", b"go", "Expect: 100-continue\r\n"))
        assert (await reader.readuntil(b"\r\n\r\n")) == b"HTTP/1.1 100 Continue\r\n\r\n"
        assert (await _read_answer(reader))[2] == b"asgi:/d/c:go"
        chunked = b"POST /d/k HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        writer.write(chunked + b"2\r\nab\r\n0\r\n\r\n")
        assert (await _read_answer(reader))[2] == b"asgi:/d/k:ab"
        large = b"z" * (connections.DIRECT_MAX_BODY + 1)
        writer.write(_request("/d/large", large))
        assert (await _read_answer(reader))[2] == b"asgi:/d/large:" + large
        at_limit = b"y" * connections.DIRECT_MAX_BODY
        writer.write(_request("/d/limit", at_limit))
        assert (await _read_answer(reader))[2] == b"direct:" + at_limit
        writer.write(_request("/other", b"x"))
        assert (await _read_answer(reader))[2] == b"asgi:/other:x"
        # Pipelined behind a direct request not answered yet: uvicorn queues the next one,
        # and the answers leave in order.
        writer.write(_request("/d/wait", b"1") + _request("/d/after", b"2"))
        await asyncio.wait_for(direct.waiting.wait(), 10)  # both heads parsed by now
        direct.release.set()
        assert (await _read_answer(reader))[2] == b"direct:1"
        assert (await _read_answer(reader))[2] == b"asgi:/d/after:2"
        assert [t[1] for t in direct.taken] == ["/d/one", "/d/limit", "/d/wait"]
        # A handler that fails: 500, and the connection closed after it.
        writer.write(_request("/d/fail"))
        status, headers, body = await _read_answer(reader)
        assert status == b"HTTP/1.1 500 Internal Server Error"
        assert headers[b"connection"] == b"close" and await reader.read() == b""
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_request("/d/bad"))  # a header that would split the answer: refused
        status, _headers, _body = await _read_answer(reader)
        assert status == b"HTTP/1.1 500 Internal Server Error"
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_request("/d/two", b"x", "Connection: close\r\n"))
        status, headers, body = await _read_answer(reader)
        assert headers[b"connection"] == b"close" and body == b"direct:x"
        assert await reader.read() == b""
        writer.close()


class _Timer:
    def __init__(self, when: float, callback: Any) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _Clock:
    """The running loop, with a fake clock for its timers: ``advance`` runs those due."""

    def __init__(self, real: asyncio.AbstractEventLoop) -> None:
        self.real = real
        self.now = 0.0
        self.timers: list[_Timer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any, *args: Any) -> _Timer:
        timer = _Timer(when, lambda: callback(*args))
        self.timers.append(timer)
        return timer

    def call_later(self, delay: float, callback: Any, *args: Any) -> _Timer:
        return self.call_at(self.now + delay, callback, *args)

    def advance(self, to: float) -> None:
        while due := sorted(
            (t for t in self.timers if t.when <= to and not t.cancelled), key=lambda t: t.when
        ):
            timer = due[0]
            self.timers.remove(timer)
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = to

    def armed(self) -> int:
        return sum(not t.cancelled for t in self.timers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)  # create_task, call_soon: the real loop's


class _Peer(_Socket):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("192.0.2.1", 5000), "sockname": ("127.0.0.1", 80)}.get(name, default)

    def pause_reading(self) -> None:
        """Flow control: nothing to hold back here (the test feeds the protocol itself)."""

    def resume_reading(self) -> None:
        """As ``pause_reading``."""


async def test_one_timer_keeps_the_head_body_and_keep_alive_time_outs() -> None:
    """Head 2 s, body 2 s, keep-alive 1 s, on a fake clock: each deadline holds, requests back
    to back keep the connection, and a timer is not set per request."""
    direct = _Direct()
    clock = _Clock(asyncio.get_running_loop())
    counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
    config = uvicorn.Config(direct, access_log=False, timeout_keep_alive=1.0, log_level="critical")
    config.load()
    state = ServerState()

    def connect(at: float) -> tuple[Any, _Peer]:
        clock.advance(at)
        made = connections.protocol(2.0, counts, 2.0, 0)(
            config=config, server_state=state, app_state={connections.DIRECT: direct}, _loop=clock
        )
        peer = _Peer()
        made.connection_made(peer)
        return made, peer

    async def answered(proto: Any, request: bytes) -> None:
        proto.data_received(request)
        await asyncio.gather(*state.tasks)

    proto, peer = connect(0.0)
    clock.advance(1.9)
    await answered(proto, _request("/d/a", b"1"))  # idle from 1.9: closes at 2.9
    clock.advance(2.8)
    assert not peer.closed
    for at in (2.8, 3.6, 4.4, 5.2, 6.0):  # back to back, each within the keep-alive
        clock.advance(at)
        await answered(proto, _request("/d/a", b"1"))
    assert not peer.closed and clock.armed() == 1
    assert len(peer.calls) == 6 and all(c[0].startswith(b"HTTP/1.1 201") for c in peer.calls)
    clock.advance(6.99)
    assert not peer.closed
    clock.advance(7.0)
    assert peer.closed  # idle for the keep-alive time-out

    # A head that never ends: 2 s from the connection's start.
    proto, peer = connect(10.0)
    clock.advance(11.0)
    proto.data_received(b"POST /d/x HTTP/1.1\r\nHo")
    clock.advance(11.99)
    assert not peer.closed
    clock.advance(12.0)
    assert peer.closed

    # A later request's head on a kept-alive connection: 2 s from its first byte.
    proto, peer = connect(20.0)
    await answered(proto, _request("/d/a", b"1"))
    clock.advance(20.5)
    proto.data_received(b"POST /d/x HTTP/1.1\r\nHo")
    clock.advance(22.49)
    assert not peer.closed
    proto.data_received(b"st: t\r\n")  # bytes that do not end the head do not move it
    clock.advance(22.5)
    assert peer.closed

    # A body that stops coming: 2 s from the head's end.
    proto, peer = connect(30.0)
    proto.data_received(b"POST /d/x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345")
    clock.advance(31.99)
    assert not peer.closed
    clock.advance(32.0)
    assert peer.closed

    # The next request's head starts while the one before is handled: its answer does not
    # turn the head's deadline into the keep-alive one (bytes would then clear it).
    proto, peer = connect(40.0)
    direct.release.clear()
    proto.data_received(_request("/d/wait", b"1") + b"POST /d/y HTTP/1.1\r\n")
    await asyncio.wait_for(direct.waiting.wait(), 10)
    clock.advance(40.5)
    direct.release.set()
    await asyncio.gather(*state.tasks)
    assert peer.calls and not peer.closed
    clock.advance(41.5)
    proto.data_received(b"Host: t\r\n")
    clock.advance(41.99)
    assert not peer.closed
    clock.advance(42.0)
    assert peer.closed  # 2 s after the head's first byte


async def test_a_direct_answer_after_the_client_left_or_at_a_shutdown() -> None:
    """The client goes while its request is handled: the request still completes (what it
    stored stays), its answer is dropped. A shutdown meanwhile: the answer goes, with
    ``connection: close``, and the connection closes after it."""
    direct = _Direct()
    config = uvicorn.Config(direct, access_log=False, log_level="critical")
    config.load()
    state = ServerState()
    counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
    make = connections.protocol(2.0, counts, 2.0, 0)

    def connect() -> tuple[Any, _Peer]:
        made = make(config=config, server_state=state, app_state={connections.DIRECT: direct})
        peer = _Peer()
        made.connection_made(peer)
        return made, peer

    gone, gone_peer = connect()
    gone.data_received(_request("/d/wait", b"1"))
    await asyncio.wait_for(direct.waiting.wait(), 10)
    gone.connection_lost(None)
    direct.release.set()
    await asyncio.gather(*state.tasks)  # no error
    assert gone_peer.calls == [] and counts.open == {}

    direct.waiting.clear()
    direct.release.clear()
    stopping, peer = connect()
    stopping.data_received(_request("/d/wait", b"2"))
    await asyncio.wait_for(direct.waiting.wait(), 10)
    stopping.shutdown()
    assert not peer.closed  # the request in hand is answered first
    direct.release.set()
    await asyncio.gather(*state.tasks)
    [[answer]] = peer.calls
    assert answer.startswith(b"HTTP/1.1 201 Created") and b"\r\nconnection: close\r\n" in answer
    assert answer.endswith(b"\r\n\r\ndirect:2") and peer.closed


async def test_a_client_that_does_not_read_its_answers_gets_no_direct_answer_to_pile_up() -> None:
    """Writes paused (the client reads nothing, the socket's buffer is full): a request goes to
    uvicorn's ASGI cycle, whose ``send`` waits until the client reads again."""
    direct = _Direct()
    config = uvicorn.Config(direct, access_log=False, log_level="critical")
    config.load()
    state = ServerState()
    counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
    proto = connections.protocol(2.0, counts, 2.0, 0)(
        config=config, server_state=state, app_state={connections.DIRECT: direct}
    )
    peer = _Peer()
    proto.connection_made(peer)
    proto.pause_writing()
    proto.data_received(_request("/d/held", b"1"))
    assert direct.taken == []  # not taken: uvicorn's cycle has it
    waiting = asyncio.ensure_future(asyncio.gather(*state.tasks))
    await asyncio.sleep(0)  # the cycle's first step: as far as it goes before the drain
    assert peer.calls == [] and not waiting.done()  # send waits for the drain
    proto.resume_writing()
    await asyncio.wait_for(waiting, 10)
    assert b"".join(c for call in peer.calls for c in call).endswith(b"asgi:/d/held:1")
    proto.data_received(_request("/d/again", b"2"))  # reading the answers again: taken
    await asyncio.gather(*state.tasks)
    assert [t[1] for t in direct.taken] == ["/d/again"]
