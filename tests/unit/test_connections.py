"""The per-client connection count (api/connections.py)."""

from __future__ import annotations

import doctest

from sluice import public_url
from sluice.api import connections


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
