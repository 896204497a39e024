"""Where HTTP endpoints answer, and what may cross between an endpoint and a browser. Pure.

``SLUICE_ENDPOINT_BASE_URL`` is either a base the endpoint's id is appended to (the default,
``<public url>/e/``: endpoints share the web UI's origin) or a template with ``{id}`` in its
host, as Pipedream's ``<id>.m.pipedream.net``: ``https://{id}.hooks.example.com/`` gives every
endpoint an origin of its own, and a request whose ``Host`` matches the template is that
endpoint's, whatever its path (the web UI and ``/v1`` are never served on such a host).

What crosses depends on where the request came:

- **On a shared origin** (``/e/<id>`` on the UI's host, or on a host every endpoint shares), a
  browser sends every endpoint the cookies of the origin, which include the UI's session and
  those every other endpoint set. So no ``Cookie`` header reaches the endpoint at all, and no
  header leaves it that would change the origin's state in the browser: ``Set-Cookie`` (named
  or not: ``=sluice_session=…`` is a nameless cookie some browsers store as
  ``sluice_session``), ``Set-Cookie2``, ``Clear-Site-Data`` (it would log visitors out of the
  UI) and ``Service-Worker-Allowed`` (it would let a worker control the whole origin).
- **On its own host**, the endpoint's cookies are its own, as on Pipedream: ``Cookie`` passes
  (without Sluice's own ``sluice_…`` cookies), and ``Set-Cookie`` too, except a cookie with a
  ``Domain`` attribute (it would reach sibling endpoints, or the UI on a parent domain), a
  nameless one, or one named as Sluice's own. ``Clear-Site-Data`` never passes: its
  ``"cookies"`` clears the whole registrable domain (``hooks.example.com``'s parent
  ``example.com``, where the UI may be), not the endpoint's host alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Cookies of the web UI (the session, the OAuth binding): never an endpoint's to read or set.
OWN_COOKIE_PREFIX = "sluice_"
#: Answer headers dropped on a shared origin: each changes what the browser keeps for the
#: whole origin (the UI's included).
_ORIGIN_STATE = frozenset(
    {"set-cookie", "set-cookie2", "clear-site-data", "service-worker-allowed"}
)
_ID = "{id}"
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class EndpointBase:
    """``SLUICE_ENDPOINT_BASE_URL``, parsed. ``host_prefix``/``host_suffix`` surround ``{id}``
    in the host of a per-endpoint template; both None for a base the id is appended to."""

    value: str
    host_prefix: str | None = None
    host_suffix: str | None = None

    @property
    def per_endpoint_hosts(self) -> bool:
        return self.host_prefix is not None


def parse(value: str) -> EndpointBase:
    """``parse("https://{id}.hooks.example.com/")`` → ``EndpointBase(…, host_prefix="",
    host_suffix=".hooks.example.com")``; ``parse("https://example.com/e/")`` → a base the id is
    appended to. Raises ValueError saying what is wrong (``{id}`` outside the host, a path
    after a templated host, a scheme that is not http or https)."""
    if not value:
        return EndpointBase("")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    if _ID not in value:
        return EndpointBase(value)
    host = (parts.hostname or "").lower()
    if value.count(_ID) != 1 or _ID not in host:
        raise ValueError(f"{value!r}: {_ID} must appear once, in the host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{value!r}: a per-endpoint host serves every path; give no path")
    prefix, _, suffix = host.partition(_ID)
    if "." in prefix or not suffix.startswith(".") or suffix.count(".") < 1:
        raise ValueError(f"{value!r}: {_ID} must be in the first label of the host")
    return EndpointBase(value, host_prefix=prefix, host_suffix=suffix)


def url(base: EndpointBase, default_base: str, endpoint_id: str) -> str:
    """An endpoint's public URL: ``https://<id>.hooks.example.com`` for a template, else the
    base (``default_base``, ``<public url>/e/``, when none is set) with the id appended.

    >>> url(parse("https://{id}.h.example.com/"), "", "ab12")
    'https://ab12.h.example.com'
    >>> url(parse(""), "http://127.0.0.1:8000/e/", "ab12")
    'http://127.0.0.1:8000/e/ab12'
    """
    if base.per_endpoint_hosts:
        return base.value.replace(_ID, endpoint_id).rstrip("/")
    prefix = base.value or default_base
    return (prefix if prefix.endswith("/") else prefix + "/") + endpoint_id


def endpoint_of_host(base: EndpointBase, host: str) -> str | None:
    """The endpoint id a ``Host`` header names under a per-endpoint template, else None. A host
    of the template's shape is an endpoint host even when no endpoint has that id (then it is
    not found); the port is not compared (proxies differ in passing it).

    >>> endpoint_of_host(parse("https://{id}.h.example.com/"), "AB12.h.example.com:443")
    'ab12'
    >>> endpoint_of_host(parse("https://{id}.h.example.com/"), "h.example.com") is None
    True
    """
    if base.host_prefix is None or base.host_suffix is None:
        return None
    name = _hostname(host)
    if not (name.endswith(base.host_suffix) and name.startswith(base.host_prefix)):
        return None
    label = name[len(base.host_prefix) : len(name) - len(base.host_suffix)]
    return label if _LABEL.match(label) else None


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host  # an IPv6 literal is never an endpoint host
    return (host.rsplit(":", 1)[0] if ":" in host else host).rstrip(".")


# ---- what crosses ---------------------------------------------------------------------------


def is_own_cookie(name: str) -> bool:
    """``is_own_cookie(" Sluice_Session")`` → True (also behind ``__Host-``/``__Secure-``);
    ``is_own_cookie("sid")`` → False."""
    bare = name.strip().lower()
    for prefix in ("__host-", "__secure-"):
        bare = bare.removeprefix(prefix)
    return bare.startswith(OWN_COOKIE_PREFIX)


def request_headers(headers: list[tuple[str, str]], *, own_origin: bool) -> list[tuple[str, str]]:
    """The request headers an endpoint gets: on a shared origin no ``Cookie``; on its own,
    ``Cookie`` without Sluice's own cookies.

    >>> request_headers([("cookie", "a=1; sluice_session=t"), ("x", "y")], own_origin=False)
    [('x', 'y')]
    >>> request_headers([("Cookie", "a=1; sluice_session=t; b=2")], own_origin=True)
    [('Cookie', 'a=1; b=2')]
    """
    out: list[tuple[str, str]] = []
    for name, value in headers:
        if name.lower() == "cookie":
            if not own_origin:
                continue
            kept = [
                part.strip()
                for part in value.split(";")
                if part.strip() and not is_own_cookie(part.split("=", 1)[0])
            ]
            if not kept:
                continue
            value = "; ".join(kept)
        out.append((name, value))
    return out


def answer_headers(
    headers: Iterable[tuple[str, str]], *, own_origin: bool
) -> list[tuple[str, str]]:
    """The answer headers an endpoint may send (names lowercased, as ``http_events`` makes
    them): on a shared origin none that changes the origin's state; on its own, cookies that
    stay on its host, and never ``Clear-Site-Data``.

    >>> answer_headers([("set-cookie", "a=1"), ("clear-site-data", "*")], own_origin=False)
    []
    >>> answer_headers([("set-cookie", "a=1"), ("set-cookie", "b=2; Domain=example.com"),
    ...                 ("set-cookie", "=sluice_session=x")], own_origin=True)
    [('set-cookie', 'a=1')]
    """
    if not own_origin:
        return [(k, v) for k, v in headers if k.lower() not in _ORIGIN_STATE]
    return [
        (k, v)
        for k, v in headers
        if k.lower() != "clear-site-data" and (k.lower() != "set-cookie" or _host_only(v))
    ]


def _host_only(set_cookie: str) -> bool:
    """Whether a ``Set-Cookie`` value names a cookie (not Sluice's own) kept on its host."""
    pair, *attributes = set_cookie.split(";")
    name, eq, _ = pair.partition("=")
    if not eq or not name.strip() or is_own_cookie(name):
        return False  # nameless: some browsers take "=a=b" as the cookie "a"
    return not any(a.split("=", 1)[0].strip().lower() == "domain" for a in attributes)
