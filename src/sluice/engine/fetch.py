"""Fetching ``component_url``: http(s) only, public addresses only, bounded size and time.

Every hop of a redirect is checked again. A host resolving to a private, loopback, link-local or
otherwise non-global address is refused unless ``SLUICE_FETCH_ALLOW_HOSTS`` names it. GitHub
"blob" URLs are read from their raw form, as Pipedream accepts them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from urllib.parse import urljoin, urlsplit

import httpx

from sluice import errors

_BLOB = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/blob/(.+)$")


def raw_url(url: str) -> str:
    m = _BLOB.match(url)
    if m:
        return f"https://raw.githubusercontent.com/{m.group(1)}/{m.group(2)}/{m.group(3)}"
    return url


async def check_host(host: str, port: int, allow: frozenset[str]) -> None:
    if host.lower() in allow:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise errors.FetchFailed(f"cannot resolve {host}: {exc}", field="component_url") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        mapped = getattr(address, "ipv4_mapped", None)
        if not (mapped or address).is_global:
            raise errors.FetchFailed(
                f"{host} resolves to {address}, a private or local address; Sluice fetches "
                "components only from public addresses (SLUICE_FETCH_ALLOW_HOSTS can allow it)",
                field="component_url",
            )


async def fetch_text(
    url: str, *, time_limit: float, max_bytes: int, allow_hosts: str = "", max_redirects: int = 5
) -> str:
    allow = frozenset(h.strip().lower() for h in allow_hosts.split(",") if h.strip())
    current = raw_url(url)
    try:
        async with (
            asyncio.timeout(time_limit),
            httpx.AsyncClient(follow_redirects=False, timeout=time_limit) as client,
        ):
            for _ in range(max_redirects + 1):
                parts = urlsplit(current)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise errors.FetchFailed(
                        f"component_url must be an http(s) URL, not {current!r}",
                        field="component_url",
                    )
                port = parts.port or (443 if parts.scheme == "https" else 80)
                await check_host(parts.hostname, port, allow)
                async with client.stream("GET", current) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = urljoin(current, response.headers["location"])
                        continue
                    if response.status_code != 200:
                        raise errors.FetchFailed(
                            f"GET {current} answered {response.status_code}",
                            field="component_url",
                        )
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise errors.PayloadTooLarge(
                                f"component_url: the code is over {max_bytes} bytes",
                                field="component_url",
                            )
                    return body.decode("utf-8", errors="replace")
            raise errors.FetchFailed(f"too many redirects fetching {url}", field="component_url")
    except TimeoutError as exc:
        raise errors.FetchFailed(
            f"fetching {url} took longer than {time_limit:g} s", field="component_url"
        ) from exc
    except httpx.HTTPError as exc:
        raise errors.FetchFailed(f"fetching {url} failed: {exc}", field="component_url") from exc
