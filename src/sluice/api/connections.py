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
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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
            super().connection_made(transport)
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
