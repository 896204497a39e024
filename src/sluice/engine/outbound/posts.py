"""A lean HTTP/1.1 client for webhook deliveries: an ``aiohttp`` session that connects only
where the egress policy allows, vetted at every new connection.

Why not the shared ``httpx`` client (``engine/outbound/http_clients.py``) that Sluice's other
requests use: deliveries are the one path that makes hundreds of requests a second from one
process, and there ``httpx`` was the floor (bench/README.md, "Webhook deliveries": ~1.6 ms of
CPU a POST on the bench machine against ~0.3 ms for ``aiohttp``, whose HTTP parser is compiled).

The check, as ``outbound``'s: a name goes through the connector's resolver
(``_VettingResolver``), which resolves it once, checks every address (``runtime.egress.vet``)
and hands aiohttp only the vetted addresses, so the connection is made to one of them (no
window for DNS rebinding) while the URL, ``Host`` header, TLS SNI and certificate check keep
the name (aiohttp keys its pool by name). Its DNS cache is off: every new connection is
vetted again. aiohttp never hands an IP literal to a resolver, so ``Poster.post`` vets a
literal host itself before the request (nothing to resolve, nothing to rebind; aiohttp also
refuses the legacy numeric spellings such as ``2130706433``).

No proxy from the environment, no cookie kept (one session serves every account), redirects
not followed, bodies not decompressed.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.helpers import is_ip_address
from yarl import URL

from sluice import errors
from sluice.domain import egress
from sluice.engine.outbound import tls
from sluice.runtime.egress import Resolver, SystemResolver, vet


class _VettingResolver(AbstractResolver):
    def __init__(self, policy: egress.EgressPolicy, resolver: Resolver) -> None:
        self._policy = policy
        self._resolver = resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        verdict = await vet(self._policy, self._resolver, host, port)
        if not verdict.allowed:
            raise errors.EgressRefused(verdict.reason, details={"final": verdict.final})
        return [
            {
                # The name stays for SNI and the certificate check; the address is the one vetted.
                "hostname": host,
                "host": str(address),
                "port": port,
                "family": socket.AF_INET if address.version == 4 else socket.AF_INET6,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in verdict.addresses
        ]

    async def close(self) -> None:
        return None


#: What ``Poster.post`` raises for the network or the URL (``errors.EgressRefused`` and
#: ``TimeoutError`` aside): aiohttp's errors, a socket's, a URL that does not parse.
ERRORS = (aiohttp.ClientError, OSError, ValueError)


def failure(exc: Exception) -> str:
    """An attempt's error as stored and listed (docs/api.md): ``ConnectError: …`` when no
    connection could be made, else the error's class and message."""
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(
        exc, aiohttp.ClientSSLError
    ):
        reason = exc.os_error.strerror or str(exc.os_error)
        return f"ConnectError: cannot connect to {exc.host}:{exc.port}: {reason}"
    return f"{type(exc).__name__}: {exc}"


class Poster:
    """POSTs under one egress policy on kept-alive connections; made on first use inside the
    event loop, closed by ``aclose``."""

    def __init__(
        self,
        policy: egress.EgressPolicy,
        *,
        resolver: Resolver | None = None,
        max_connections: int = 100,
        keepalive_seconds: float = 15.0,
    ) -> None:
        self.policy = policy
        self._resolver = resolver or SystemResolver()
        self._max_connections = max_connections
        self._keepalive_seconds = keepalive_seconds
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                resolver=_VettingResolver(self.policy, self._resolver),
                use_dns_cache=False,
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=self._keepalive_seconds,
                # The same trust store as Sluice's other requests (httpx's: certifi).
                ssl=tls.context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                auto_decompress=False,
                # The caller bounds each request (``time_limit``).
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        time_limit: float,
        read_limit: int,
    ) -> int:
        """POST ``body`` once and answer the status. Up to ``read_limit`` bytes of the answer's
        body are read (and dropped) so its connection is kept for the next POST; a longer one
        is closed. Raises ``errors.EgressRefused`` (the policy), ``TimeoutError`` (past
        ``time_limit`` seconds in all) or ``aiohttp.ClientError`` (the network, the URL)."""
        target = URL(url)
        host = target.raw_host
        if host is not None and _literal(host):
            verdict = await vet(self.policy, self._resolver, host, target.port or 0)
            if not verdict.allowed:
                raise errors.EgressRefused(verdict.reason, details={"final": verdict.final})
        session = self._open()
        async with (
            asyncio.timeout(time_limit),
            session.post(target, data=body, headers=headers, allow_redirects=False) as response,
        ):
            read = 0
            while read <= read_limit:
                chunk = await response.content.readany()
                if not chunk:
                    break
                read += len(chunk)
            return response.status

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _literal(host: str) -> bool:
    """Whether aiohttp would connect to ``host`` as it is, not through the resolver, or
    ``host`` is an IP address in any spelling."""
    if is_ip_address(host):
        return True
    try:
        return not isinstance(egress.parse_host(host), str)
    except ValueError:
        return True  # refused by ``vet`` with its reason
