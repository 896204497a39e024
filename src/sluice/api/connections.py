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

The protocol also writes each answer's head and body in one system call (``OneWrite``):
uvicorn writes them apart, two ``write`` calls and, with ``TCP_NODELAY``, two TCP segments a
response; at ~15,000 source requests a second on one core that second call was ~5% of the
server's CPU (issue 29). An answer known before its request (an endpoint's default ``200``)
goes out whole on uvicorn's own cycle (``WholeAnswer``), past the checks uvicorn's ``send``
makes of every ASGI message.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from starlette.types import Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

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
        _head_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _body_started = 0.0
        _body_received = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(OneWrite(transport, self.loop))
            address = self.client[0] if self.client else ""
            if not counts.admit(address):
                transport.abort()  # nothing read, nothing answered: a reset costs least
                return
            self._address = address
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._body_done()
            if self._address is not None:
                counts.release(self._address)
                self._address = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._head_timer is None:
                self._arm()  # a later request of a kept-alive connection: its head's clock

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()
            if body_timeout > 0:
                self._body_started, self._body_received = self.loop.time(), 0
                self._body_arm()

        def on_body(self, body: bytes) -> None:
            self._body_received += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._body_done()
            super().on_message_complete()

        def _body_arm(self) -> None:
            due = body_deadline(
                self._body_started, self._body_received, body_timeout, body_min_rate
            )
            self._body_timer = self.loop.call_at(due, self._body_check)

        def _body_done(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_check(self) -> None:
            self._body_timer = None
            if self.transport.is_closing():
                return
            if self.flow.read_paused:
                # The server is not reading (the application has not taken the body yet):
                # that time is not the client's.
                self._body_started = self.loop.time() - body_timeout
                self._body_received = 0
                self._body_arm()
                return
            due = body_deadline(
                self._body_started, self._body_received, body_timeout, body_min_rate
            )
            if due > self.loop.time():
                self._body_arm()  # bytes came in since: the deadline moved
                return
            self.transport.close()

        def _arm(self) -> None:
            if head_timeout > 0:
                self._head_timer = self.loop.call_later(head_timeout, self._head_too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
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


class WholeAnswer:
    """An answer whose bytes are known before its request (an endpoint's default ``200
    {"success":true}``), written whole on uvicorn's own HTTP cycle.

    uvicorn's ``send`` assembles an answer's head from its ASGI message on every request (a
    regular expression over each header's name and value), and ``OneWrite`` holds that head
    for the body's write. ``send`` here writes the status line, uvicorn's own headers
    (``date`` and ``server``: the cycle's ``default_headers``, which uvicorn makes anew each
    second), the answer's headers and its body in one write, then marks the cycle answered as
    uvicorn's ``send`` does at an answer's end (keep-alive, the next pipelined request): a
    source request costs ~7% less CPU against the bare app's (``bench/asgi_servers.py --role
    api --interleave 5``; bench/README.md, issue 29). It does so only on uvicorn's httptools
    cycle, before anything was sent, on a connection that stays open, with writes not paused,
    not for ``HEAD`` and not with uvicorn's access log on; else it sends nothing and returns
    False, and the caller sends the ASGI messages."""

    def __init__(self, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> None:
        self._status_line = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()
        self._tail = b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n" + body
        #: The bytes for the last ``default_headers`` seen (a new list each second).
        self._defaults: list[tuple[bytes, bytes]] | None = None
        self._whole = b""

    def send(self, send: Send) -> bool:
        """The answer written on ``send``'s cycle (True), or nothing sent (False)."""
        cycle = getattr(send, "__self__", None)
        if type(cycle) is not RequestResponseCycle:
            return False
        if cycle.disconnected:
            return True  # uvicorn's send drops an answer to a client gone, as here
        if (
            cycle.response_started
            or not cycle.keep_alive
            or cycle.access_log
            or cycle.flow.write_paused
            or cycle.scope["method"] == "HEAD"
        ):
            return False
        defaults = cycle.default_headers
        if defaults is not self._defaults:
            self._defaults = defaults
            head = b"".join(k + b": " + v + b"\r\n" for k, v in defaults)
            self._whole = self._status_line + head + self._tail
        cycle.response_started = True
        cycle.waiting_for_100_continue = False
        transport = cycle.transport
        if isinstance(transport, OneWrite):
            transport.write_now(self._whole)
        else:
            transport.write(self._whole)
        cycle.response_complete = True
        cycle.message_event.set()
        cycle.on_response()
        return True
