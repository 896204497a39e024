"""Which base URL the links Sluice makes start with, when ``SLUICE_PUBLIC_URL`` is not set.

``Settings.resolved_public_url`` is, in order:

1. ``SLUICE_PUBLIC_URL`` (``--public-url``) when set: every link, in every process;
2. while a request is being answered, the URL that request came to: its scheme and ``Host``
   header, or ``X-Forwarded-Proto`` / ``X-Forwarded-Host`` when the peer that sent it is one of
   ``SLUICE_TRUSTED_PROXIES`` (a comma list of addresses or networks, or ``*``; none by
   default, so those headers are ignored);
3. else ``http://<host>:<port>``.

With no request at hand (a run resumed by a timer, the global error workflow's e-mail: work
done by the job worker), ``Settings.public_url_for(owner_id)`` adds, between 2 and 3, the URL of
the last authenticated request of that account to this process (kept in memory). Per account,
so a request with a forged ``Host`` only ever changes the links of its own account's e-mails. A
``--role worker`` process answers no requests: it uses 1, else 3, so set ``SLUICE_PUBLIC_URL``
wherever workers run apart (docs/deploy.md, "The public URL").
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import MutableMapping
from contextvars import ContextVar, Token
from typing import Any

_current: ContextVar[str | None] = ContextVar("sluice_request_base_url", default=None)
#: owner id → the base URL of its last authenticated request (bounded: oldest out first).
_last: OrderedDict[str, str] = OrderedDict()
_LAST_MAX = 10_000

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """``SLUICE_TRUSTED_PROXIES``: the peers whose ``X-Forwarded-*`` headers are believed."""

    def __init__(self, spec: str) -> None:
        items = [item.strip() for item in spec.split(",") if item.strip()]
        self.everyone = "*" in items
        self.networks: list[Network] = [
            ipaddress.ip_network(item, strict=False) for item in items if item != "*"
        ]

    def __bool__(self) -> bool:
        return self.everyone or bool(self.networks)

    def trusts(self, host: str | None) -> bool:
        if self.everyone:
            return True
        if not host or not self.networks:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:  # a Unix socket path, a test client's name
            return False
        return any(address in network for network in self.networks)


def check(spec: str) -> None:
    """Raise ValueError naming what is wrong in a ``SLUICE_TRUSTED_PROXIES`` value."""
    TrustedProxies(spec)


def _first(headers: dict[bytes, bytes], name: bytes) -> str | None:
    value = headers.get(name)
    if not value:
        return None
    first = value.decode("latin-1").split(",")[0].strip()
    return first or None


def _forwarded_client(header: str, trusted: TrustedProxies) -> str | None:
    """The client an ``X-Forwarded-For`` chain names: its last address not a trusted proxy."""
    hops = [hop.strip() for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not trusted.trusts(hop):
            return hop
    return hops[0] if hops else None


def enter(scope: MutableMapping[str, Any], trusted: TrustedProxies) -> Token[str | None]:
    """Make the request of ``scope`` the current one (its base URL, ``current()``), with
    ``scope`` rewritten for a trusted proxy (its ``scheme`` and ``client`` become the forwarded
    ones). ``leave(token)`` when the request is answered."""
    return _current.set(base_url(scope, trusted) or None)


def leave(token: Token[str | None]) -> None:
    _current.reset(token)


def base_url(scope: MutableMapping[str, Any], trusted: TrustedProxies) -> str:
    """The base URL of an HTTP request (see ``enter``); ``""`` when it cannot be told."""
    headers = dict(scope.get("headers") or [])
    scheme = scope.get("scheme") or "http"
    host = _first(headers, b"host")
    peer = (scope.get("client") or (None, None))[0]
    if trusted and trusted.trusts(peer):
        forwarded_proto = _first(headers, b"x-forwarded-proto")
        if forwarded_proto in ("http", "https"):
            scheme = forwarded_proto
            scope["scheme"] = scheme
        forwarded_host = _first(headers, b"x-forwarded-host")
        if forwarded_host and _plausible_host(forwarded_host):
            host = forwarded_host  # and the request's Host (same-origin checks, request.url)
            scope["headers"] = [(k, v) for k, v in scope.get("headers") or [] if k != b"host"] + [
                (b"host", forwarded_host.encode("latin-1"))
            ]
        forwarded_for = headers.get(b"x-forwarded-for")
        if forwarded_for:
            client = _forwarded_client(forwarded_for.decode("latin-1"), trusted)
            if client:
                scope["client"] = (client, 0)
    if not host or not _plausible_host(host):
        server = scope.get("server")
        host = f"{server[0]}:{server[1]}" if server else None
    return f"{scheme}://{host}" if host else ""


def _plausible_host(host: str) -> bool:
    """A host[:port] as browsers send it: nothing that would change a URL's meaning."""
    return not any(c in host for c in "/\\?#@ \t\r\n\"'<>`") and len(host) <= 255


def current() -> str | None:
    """The base URL of the request being answered in this task, if any."""
    return _current.get()


def remember(owner_id: str) -> None:
    """Keep the current request's base URL as ``owner_id``'s last known one."""
    base = _current.get()
    if base is None:
        return
    if _last.get(owner_id) != base:
        _last[owner_id] = base
    _last.move_to_end(owner_id)
    while len(_last) > _LAST_MAX:
        _last.popitem(last=False)


def last_known(owner_id: str) -> str | None:
    return _last.get(owner_id)


def forget_all() -> None:
    """For tests: no account's last request is known."""
    _last.clear()
