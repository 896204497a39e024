"""Connections to the HTTP server, bounded so that idle ones cannot starve other clients.

uvicorn times out a keep-alive connection idle *after* an answer (``timeout_keep_alive``), but
not one that never finishes a request head: 19,970 connections that sent nothing (or a byte a
minute) held the server's descriptors until another client's ``GET /v1/users/me`` was reset.
``protocol`` makes uvicorn's HTTP protocol with two guards:

- **Request-head time-out**: a request's head (the request line and headers) must arrive
  within ``SLUICE_HTTP_HEAD_TIMEOUT_SECONDS`` of the connection's start, or of the first byte
  of a later request on a kept-alive one; else the connection is closed. (Idle between
  requests: uvicorn's keep-alive time-out, 5 s.)
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


def protocol(head_timeout: float, counts: ClientCounts) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the head time-out and the per-client cap
    (``uvicorn.run(..., http=protocol(...))``)."""

    class GuardedProtocol(HttpToolsProtocol):
        _address: str | None = None
        _head_timer: asyncio.TimerHandle | None = None

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
        "http": protocol(settings.http_head_timeout_seconds, counts),
        "timeout_keep_alive": settings.http_keep_alive_seconds,
    }
