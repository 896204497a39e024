"""Connections to the HTTP server, bounded so that idle ones cannot starve other clients.

uvicorn times out a keep-alive connection idle *after* an answer (``timeout_keep_alive``), but
not one that never finishes a request head: 19,970 connections that sent nothing (or a byte a
minute) held the server's descriptors until another client's ``GET /v1/users/me`` was reset.
``protocol`` makes uvicorn's HTTP protocol with two guards:

- **Request-head time-out**: a request's head (the request line and headers) must arrive
  within ``SLUICE_HTTP_HEAD_TIMEOUT_SECONDS`` of the connection's start, or of the first byte
  of a later request on a kept-alive one; else the connection is closed. (Idle between
  requests: uvicorn's keep-alive time-out, 5 s.)
- **Request-body time-out**: once the head is in, the body must arrive within
  ``SLUICE_HTTP_BODY_TIMEOUT_SECONDS``, plus a second per
  ``SLUICE_HTTP_BODY_MIN_BYTES_PER_SECOND`` bytes received so far (a body that keeps that
  average never hits it); else the connection is closed, and the application sees the client
  gone. A client that sent a head and then a byte now and then held its connection forever.
  Time while the server itself does not read (the application not consuming the body yet,
  uvicorn's flow control) is not counted.
- **Connections per client**: one address holds at most
  ``SLUICE_HTTP_MAX_CONNECTIONS_PER_CLIENT`` open connections; past it a new one is closed at
  once, before anything is read. The peers of ``SLUICE_TRUSTED_PROXIES`` are exempt (every
  request comes through them; the proxy bounds its own clients).

The count is per process (each ``sluice serve`` process accepts on its own).

A connection has one timer for all three time-outs (uvicorn's keep-alive one too): moving a
deadline later only notes it, and the timer, firing early, finds the new deadline and is set
again. A timer set and cancelled per deadline was three a request (~5 µs each on a busy
machine); now a kept-alive connection under load sets about one per keep-alive period.

The protocol also writes each answer's head and body in one system call (``OneWrite``):
uvicorn writes them apart, two ``write`` calls and, with ``TCP_NODELAY``, two TCP segments a
response; at ~15,000 source requests a second on one core that second call was ~5% of the
server's CPU (issue 29).

And it hands some requests to a ``Direct`` (the endpoints': ``api/ingress.Direct``, put in
the lifespan state under ``DIRECT``) straight off the parser: no ASGI cycle, no scope copy
per message, no task until the body is in, and the answer written in one call
(``DirectCycle``), past the checks uvicorn's ``send`` makes of every ASGI message. Everything
else about the connection stays uvicorn's: keep-alive, pipelining (a request behind an
unanswered one is queued by uvicorn and served as ASGI), flow control, shutdown, and the
time-outs above.
"""

from __future__ import annotations

import asyncio
import contextvars
import urllib.parse
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from sluice import public_url
from sluice.config import Settings


class ClientCounts:
    """Open connections per client address: the pure part of the per-client cap."""

    def __init__(self, limit: int, exempt: public_url.TrustedProxies) -> None:
        self.limit = limit
        self.exempt = exempt
        self.open: Counter[str] = Counter()

    def admit(self, address: str) -> bool:
        """Count a new connection of ``address``, or refuse it (False: not counted).

        >>> counts = ClientCounts(1, public_url.TrustedProxies(""))
        >>> counts.admit("10.0.0.1"), counts.admit("10.0.0.1"), counts.admit("10.0.0.2")
        (True, False, True)
        """
        if self.limit > 0 and self.open[address] >= self.limit and not self.exempt.trusts(address):
            return False
        self.open[address] += 1
        return True

    def release(self, address: str) -> None:
        self.open[address] -= 1
        if self.open[address] <= 0:
            del self.open[address]


def body_deadline(started: float, received: int, timeout: float, min_rate: int) -> float:
    """When a body that began at ``started`` (its head's end) and has ``received`` bytes so
    far is too slow.

    >>> body_deadline(100.0, 0, 10.0, 4096), body_deadline(100.0, 40960, 10.0, 4096)
    (110.0, 120.0)
    """
    return started + timeout + (received / min_rate if min_rate > 0 else 0.0)


#: What a connection's one timer watches for (``protocol``).
_NONE, _HEAD, _BODY, _IDLE = range(4)


def protocol(
    head_timeout: float,
    counts: ClientCounts,
    body_timeout: float = 0.0,
    body_min_rate: int = 0,
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the head and body time-outs and the per-client cap
    (``uvicorn.run(..., http=protocol(...))``)."""

    class GuardedProtocol(HttpToolsProtocol):
        _address: str | None = None
        #: What the connection waits for (``_HEAD``, ``_BODY``, ``_IDLE``; ``_NONE``: the
        #: application's answer), and until when.
        _phase = _NONE
        _due = 0.0
        #: The one timer, and when it fires: moving ``_due`` later leaves it be (it fires
        #: early, finds the new due, and re-arms), so a request costs no timer of its own.
        _timer: asyncio.TimerHandle | None = None
        _timer_at = 0.0
        _body_started = 0.0
        _body_received = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(OneWrite(transport, self.loop))
            address = self.client[0] if self.client else ""
            if not counts.admit(address):
                transport.abort()  # nothing read, nothing answered: a reset costs least
                return
            self._address = address
            self._head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._phase = _NONE
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._address is not None:
                counts.release(self._address)
                self._address = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._phase != _HEAD:
                self._head()  # a later request of a kept-alive connection: its head's clock

        def on_headers_complete(self) -> None:
            self._phase = _NONE
            if not self._direct():
                super().on_headers_complete()
            if body_timeout > 0:
                self._body_started, self._body_received = self.loop.time(), 0
                self._watch(_BODY, self._body_started + body_timeout)

        def on_body(self, body: bytes) -> None:
            self._body_received += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._phase = _NONE
            super().on_message_complete()
            cycle = self.cycle
            if isinstance(cycle, DirectCycle) and not cycle.response_started:
                # The body is in: the handler's turn.
                run = cycle.run_direct()
                if self.config.reset_contextvars:
                    task = self.loop.create_task(run, context=contextvars.Context())
                else:
                    task = self.loop.create_task(run)
                task.add_done_callback(self.tasks.discard)
                self.tasks.add(task)

        def _direct(self) -> bool:
            """Hand the request whose head just ended to the app's ``Direct`` if it takes
            it (True), with what uvicorn's ``on_headers_complete`` puts in the scope; else
            False, and uvicorn's ASGI cycle gets it. Not taken: a pipelined request (the
            one before is not answered yet; uvicorn queues it), ``Expect: 100-continue``,
            HTTP/1.0, an upgrade, ``HEAD``, a chunked body or one over
            ``DIRECT_MAX_BODY``, anything while the client does not read its answers (writes
            paused: uvicorn's ``send`` waits for them to drain, so answers cannot pile up in
            the server), and everything while uvicorn's access log or concurrency limit is
            on."""
            direct: Direct | None = self.app_state.get(DIRECT)
            if (
                direct is None
                or self.expect_100_continue
                or self.access_log
                or self.limit_concurrency is not None
                or (self.cycle is not None and not self.cycle.response_complete)
                or self.flow.write_paused
            ):
                return False
            parser = self.parser
            if parser.get_http_version() != "1.1" or parser.should_upgrade():
                return False
            method = parser.get_method()
            if method == b"HEAD" or method == b"CONNECT":
                return False
            for name, value in self.headers:
                if name == b"content-length":
                    if not value.isdigit() or int(value) > DIRECT_MAX_BODY:
                        return False
                elif name == b"transfer-encoding":
                    return False
            scope = self.scope
            scope["method"] = method.decode("ascii")
            url = httptools.parse_url(self.url)
            raw_path: bytes = url.path
            path = raw_path.decode("ascii")
            if "%" in path:
                path = urllib.parse.unquote(path)
            scope["path"] = self.root_path + path
            scope["raw_path"] = self.root_path.encode("ascii") + raw_path
            scope["query_string"] = url.query or b""
            handler = direct.take(scope)  # type: ignore[arg-type]
            if handler is None:
                return False
            cycle = DirectCycle(
                scope=scope,
                transport=self.transport,
                flow=self.flow,
                logger=self.logger,
                access_logger=self.access_logger,
                access_log=False,
                default_headers=self.server_state.default_headers,
                message_event=asyncio.Event(),
                expect_100_continue=False,
                keep_alive=parser.should_keep_alive(),
                on_response=self.on_response_complete,
            )
            cycle.handler = handler
            self.cycle = cycle
            return True

        def on_response_complete(self) -> None:
            # uvicorn's, with the keep-alive time-out on the connection's one timer.
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._unset_keepalive_if_required()
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            elif self._phase == _NONE:  # not while a next request's head or body comes
                self._watch(_IDLE, self.loop.time() + self.timeout_keep_alive)

        def _unset_keepalive_if_required(self) -> None:
            # uvicorn's hook, on every read: bytes came, the connection is not idle.
            if self._phase == _IDLE:
                self._phase = _NONE

        def _head(self) -> None:
            if head_timeout > 0:
                self._watch(_HEAD, self.loop.time() + head_timeout)
            else:
                self._phase = _NONE

        def _watch(self, phase: int, due: float) -> None:
            self._phase, self._due = phase, due
            timer = self._timer
            if timer is not None:
                if self._timer_at <= due:
                    return
                timer.cancel()
            self._timer_at = due
            self._timer = self.loop.call_at(due, self._check)

        def _check(self) -> None:
            self._timer = None
            phase = self._phase
            if phase == _NONE or self.transport.is_closing():
                return
            now = self.loop.time()
            if phase == _BODY:
                if self.flow.read_paused:
                    # The server is not reading (the application has not taken the body
                    # yet): that time is not the client's.
                    self._body_started, self._body_received = now, 0
                self._due = body_deadline(
                    self._body_started, self._body_received, body_timeout, body_min_rate
                )
            if self._due > now:
                self._watch(phase, self._due)  # moved since the timer was set
                return
            self.transport.close()

    return GuardedProtocol


class OneWrite(asyncio.Transport):
    """A connection's transport whose writes of one turn of the event loop leave together.

    A write is held until the next one, which leaves with it in one system call, or until the
    loop's next turn (``call_soon``), whichever comes first: a response's head and its body
    (uvicorn writes them apart) cost one ``write`` and one TCP segment, and a streamed answer
    loses no time (each chunk is out by the turn after its write). Closing sends what is held
    first; aborting drops it, as aborting drops the socket's buffer. Everything else is the
    wrapped transport's."""

    #: A held write and a next one past this size leave as two buffers of one ``writelines``
    #: (one vectored system call), not copied into one.
    COPY_AT_MOST = 64 * 1024

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._due: asyncio.Handle | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._due = self._loop.call_soon(self._flush)
            return
        self._held = None
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if len(held) + len(data) <= self.COPY_AT_MOST:
            self._transport.write(held + data)
        else:
            self._transport.writelines((held, data))

    def write_now(self, data: bytes) -> None:
        """Send ``data`` at once (with what is held, if anything): it is a whole answer, and
        waiting for a next write would only delay it by a turn of the loop."""
        if self._held is None:
            self._transport.write(data)
        else:
            self.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def _flush(self) -> None:
        self._due = None
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def flush(self) -> None:
        """Send what is held now."""
        if self._due is not None:
            self._due.cancel()
        self._flush()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        self._held = None
        self._transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


def server_options(settings: Settings) -> dict[str, Any]:
    """The ``uvicorn.run`` options of ``settings``: the guarded protocol and the keep-alive
    time-out."""
    counts = ClientCounts(settings.http_max_connections_per_client, settings.proxies)
    return {
        "http": protocol(
            settings.http_head_timeout_seconds,
            counts,
            settings.http_body_timeout_seconds,
            settings.http_body_min_bytes_per_second,
        ),
        "timeout_keep_alive": settings.http_keep_alive_seconds,
    }


class Prebuilt:
    """An answer whose bytes are known before its request (an endpoint's default ``200
    {"success":true}``): the status line, uvicorn's own headers (``date`` and ``server``: the
    server's ``default_headers``, a new list each second), the answer's headers and its body,
    joined once per list of uvicorn's headers."""

    def __init__(self, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> None:
        self._status_line = STATUS_LINE[status]
        self._tail = _head(headers) + b"\r\n" + body
        #: The bytes for the last ``default_headers`` seen.
        self._defaults: list[tuple[bytes, bytes]] | None = None
        self._whole = b""

    def whole(self, defaults: list[tuple[bytes, bytes]], keep_alive: bool) -> bytes:
        if not keep_alive:
            return self._status_line + _head(defaults) + b"connection: close\r\n" + self._tail
        if defaults is not self._defaults:
            self._defaults = defaults
            self._whole = self._status_line + _head(defaults) + self._tail
        return self._whole


def _head(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    return b"".join(k + b": " + v + b"\r\n" for k, v in headers)


#: The key of the lifespan state's ``Direct``: the requests it takes skip the ASGI cycle.
DIRECT = "sluice.direct"
#: A request whose body is longer than this, or chunked, goes the ASGI way (its body read as it
#: streams, with the size checked as it comes): a direct request's body is read whole, before
#: its handler starts, and never past uvicorn's read buffer (``HIGH_WATER_LIMIT``).
DIRECT_MAX_BODY = min(64 * 1024, HIGH_WATER_LIMIT)


class Direct(Protocol):
    """Takes some requests straight off the HTTP parser (``DirectCycle``): no ASGI cycle, no
    task until the body is in, the answer written in one call."""

    def take(self, scope: dict[str, Any]) -> Callable[[DirectCycle], Awaitable[None]] | None:
        """The handler of the request ``scope`` describes (method, path, query string,
        headers, client: as uvicorn builds it), or None: the ASGI application gets it."""


class DirectCycle(RequestResponseCycle):
    """A request taken by a ``Direct``: its body read whole, then its handler run as a task,
    which answers with one ``answer``/``answer_prebuilt`` (one write). It is uvicorn's cycle
    for the rest of the connection's life: pipelined requests behind it wait for its answer
    (``on_response``), a lost connection marks it ``disconnected``, a shutdown closes the
    connection after it."""

    handler: Callable[[DirectCycle], Awaitable[None]]

    def request_body(self) -> bytes:
        return bytes(self.body)

    def answer_prebuilt(self, prebuilt: Prebuilt) -> None:
        if self.disconnected or self.response_started:
            return
        self._write(prebuilt.whole(self.default_headers, self.keep_alive))

    def answer(self, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> None:
        """Write the whole answer. Its headers are checked as uvicorn checks an ASGI app's
        (``RuntimeError``: nothing written); ``content-length`` is added where missing, and
        ``connection: close`` when the connection closes after it."""
        if self.disconnected or self.response_started:
            return
        parts = [STATUS_LINE[status], _head(self.default_headers)]
        has_length = False
        for name, value in headers:
            if HEADER_RE.search(name) or HEADER_VALUE_RE.search(value):
                raise RuntimeError(f"invalid HTTP header {name!r}")
            name = name.lower()
            if name in (b"transfer-encoding", b"connection"):
                continue  # the framing is this writer's: one body, content-length
            has_length = has_length or name == b"content-length"
            parts += (name, b": ", value, b"\r\n")
        bodiless = status < 200 or status in (204, 304) or self.scope["method"] == "HEAD"
        if not has_length and not (status < 200 or status in (204, 304)):
            parts.append(b"content-length: %d\r\n" % len(body))
        if not self.keep_alive:
            parts.append(b"connection: close\r\n")
        parts.append(b"\r\n")
        if not bodiless:
            parts.append(body)
        self._write(b"".join(parts))

    def _write(self, data: bytes) -> None:
        self.response_started = True
        transport = self.transport
        if isinstance(transport, OneWrite):
            transport.write_now(data)
        else:
            transport.write(data)
        self.response_complete = True
        self.message_event.set()
        if not self.keep_alive:
            transport.close()
        self.on_response()

    async def run_direct(self) -> None:
        """The handler, and what uvicorn does for an ASGI app that fails: logged, ``500``
        if nothing was answered yet."""
        try:
            await self.handler(self)
        except BaseException as exc:
            self.logger.error("Exception in direct handler\n", exc_info=exc)
            if not self.response_started and not self.disconnected:
                self.keep_alive = False
                self.answer(
                    500, [(b"content-type", b"text/plain; charset=utf-8")], b"Internal Server Error"
                )
            elif not self.response_complete:
                self.transport.close()
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.response_complete and not self.disconnected:
                self.logger.error("direct handler returned without answering")
                self.keep_alive = False
                self.answer(
                    500, [(b"content-type", b"text/plain; charset=utf-8")], b"Internal Server Error"
                )
        finally:
            self.on_response = _nothing


def _nothing() -> None:
    """A finished cycle's ``on_response``, as uvicorn's ``run_asgi`` leaves it."""
