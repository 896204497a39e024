"""httpx clients for Sluice's own outbound requests (``$.send.http``, ``component_url``),
vetted by the egress policy at every connection.

The check sits in httpcore's network backend, the one place every new TCP connection is made:
the host is resolved once, every address checked (``runtime.egress.vet``), and the connection
made to a vetted address literal. So there is no window for DNS rebinding, each redirect hop's
new connection is checked again, and the URL, ``Host`` header, TLS SNI and certificate check
all keep the real name (the pool is keyed by name, so a TLS connection verified for one name is
never reused for another).

Why not a library: httpx-secure validates in the same layer, but caches DNS answers for minutes
and has no allow-list of names and ports of its own; safehttpx resolves through a public DNS
server (wrong for an operator's internal names). Why not rewriting the URL to the IP with a
``Host`` header and the ``sni_hostname`` extension: the pool would be keyed by IP, and a TLS
connection verified for one name could carry another name's request.

httpx has no public parameter for httpcore's network backend, so ``_VettedTransport`` replaces
the transport's pool (``_pool``, httpx 0.28) with one built the same way plus the backend;
tests/security/test_egress.py fails if that stops taking effect.
"""

from __future__ import annotations

import http.cookiejar
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

from sluice import errors
from sluice.config import Settings
from sluice.domain import egress
from sluice.engine.outbound import tls
from sluice.runtime.egress import Resolver, SystemResolver, vet

if TYPE_CHECKING:
    from sluice.engine.outbound import posts

log = logging.getLogger(__name__)

#: A cookie policy that accepts no cookie from anywhere.
_NO_COOKIES = http.cookiejar.DefaultCookiePolicy(allowed_domains=[])

#: Appended to refusal reasons: where the operator lifts them.
HINT = "SLUICE_EGRESS_ALLOW can allow it"


def explain(refused: errors.EgressRefused) -> str:
    """The refusal's reason, with the ``HINT`` unless no allow-list entry could lift it."""
    if refused.details.get("final"):
        return refused.message
    return f"{refused.message}; {HINT}"


class _VettingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: egress.EgressPolicy, resolver: Resolver) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            verdict = await vet(self._policy, self._resolver, host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not verdict.allowed:
            log.info(
                "egress refused",
                extra={"action": "egress_refused", "host": host, "port": port},
            )
            raise errors.EgressRefused(verdict.reason, details={"final": verdict.final})
        last: Exception = httpcore.ConnectError(f"cannot connect to {host}:{port}")
        for address in verdict.addresses:
            try:
                # An address literal: anyio's getaddrinfo parses it without a DNS query.
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise errors.EgressRefused("Unix sockets are not reachable through the egress policy")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _VettedTransport(httpx.AsyncHTTPTransport):
    def __init__(
        self, policy: egress.EgressPolicy, resolver: Resolver, limits: httpx.Limits | None = None
    ) -> None:
        # The process's TLS context for both pools (httpx's, replaced below, and ours):
        # building one loads the CA bundle, the costliest part of making a client.
        context = tls.context()
        super().__init__(verify=context)
        limits = limits or httpx.Limits()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_VettingBackend(policy, resolver),
        )


def client(
    policy: egress.EgressPolicy,
    *,
    resolver: Resolver | None = None,
    limits: httpx.Limits | None = None,
    **kwargs: Any,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that connects only where ``policy`` allows; a refused
    connection raises ``errors.EgressRefused``. ``kwargs`` go to the client (not ``transport``,
    ``proxy`` or ``mounts``, which would route around the check).

    ``trust_env`` is off: an ``HTTP_PROXY`` variable would otherwise send requests to the proxy
    with the destination unchecked here.
    """
    transport = _VettedTransport(policy, resolver or SystemResolver(), limits)
    return httpx.AsyncClient(transport=transport, trust_env=False, **kwargs)


class Clients:
    """The process's shared outbound clients, one per egress policy, made on first use and
    closed when the platform closes (an async context manager). Making a client is costly (a
    TLS context, CPU on the event loop); a shared one also keeps its connections alive, so a
    webhook's deliveries reuse one connection instead of a handshake each (bench/README.md,
    "Webhook deliveries"). Deliveries use a leaner client of their own (``poster``)."""

    def __init__(
        self, *, limits: httpx.Limits | None = None, resolver: Resolver | None = None
    ) -> None:
        self._limits = limits
        self._resolver = resolver
        self._clients: dict[egress.EgressPolicy, httpx.AsyncClient] = {}
        self._posters: dict[egress.EgressPolicy, posts.Poster] = {}
        self._closed = False

    def poster(self, policy: egress.EgressPolicy) -> posts.Poster:
        """The webhook deliveries' client for ``policy`` (``engine/outbound/posts.py``).

        Imported here, at a process's first delivery, not with this module: it loads aiohttp
        and its dependencies, a fifth of a server's start (1.70 -> 1.38 s of CPU without them,
        ``bench/server_start.py``), which many processes never use."""
        from sluice.engine.outbound import posts

        if self._closed:
            raise errors.NotReady("the outbound HTTP clients are closed (shutting down)")
        shared = self._posters.get(policy)
        if shared is None:
            limits = self._limits or httpx.Limits()
            shared = self._posters[policy] = posts.Poster(
                policy,
                resolver=self._resolver,
                max_connections=limits.max_connections or 100,
                keepalive_seconds=limits.keepalive_expiry or 5.0,
            )
        return shared

    def get(self, policy: egress.EgressPolicy) -> httpx.AsyncClient:
        """The client for ``policy``: redirects not followed, no proxy from the environment."""
        if self._closed:
            raise errors.NotReady("the outbound HTTP clients are closed (shutting down)")
        shared = self._clients.get(policy)
        if shared is None:
            shared = self._clients[policy] = client(
                policy,
                resolver=self._resolver,
                limits=self._limits,
                follow_redirects=False,
                # Shared by every account: a cookie one receiver sets must never go out with
                # another's request (the jar's policy accepts none).
                # (A CookieJar as it is: httpx.Cookies would copy it into a default jar.)
                cookies=http.cookiejar.CookieJar(_NO_COOKIES),
            )
        return shared

    async def aclose(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        for each in clients:
            await each.aclose()
        posters, self._posters = list(self._posters.values()), {}
        for poster in posters:
            await poster.aclose()

    async def __aenter__(self) -> Clients:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def policy(settings: Settings) -> egress.EgressPolicy:
    """The policy of ``SLUICE_EGRESS_ALLOW``; raises ``errors.InvalidRequest`` on a bad entry."""
    return egress.EgressPolicy.parse(settings.egress_allow)


def fetch_policy(settings: Settings) -> egress.EgressPolicy:
    """``policy(settings)`` plus the hosts of the deprecated ``SLUICE_FETCH_ALLOW_HOSTS`` (bare
    names or addresses, any port), which only ever applied to ``component_url``."""
    base = policy(settings)
    hosts = [h.strip() for h in settings.fetch_allow_hosts.split(",") if h.strip()]
    if not hosts:
        return base
    log.warning(
        "SLUICE_FETCH_ALLOW_HOSTS is deprecated; list host:* entries in SLUICE_EGRESS_ALLOW",
        extra={"action": "deprecated_setting", "setting": "SLUICE_FETCH_ALLOW_HOSTS"},
    )
    rules = [
        egress.parse_rule(f"[{h}]:*" if ":" in h and not h.startswith("[") else f"{h}:*",
                          "SLUICE_FETCH_ALLOW_HOSTS")
        for h in hosts
    ]  # fmt: skip
    return base.extended(rules)
