"""Fetching ``component_url``: http(s) only, destinations the egress policy allows, bounded size
and time.

Every connection, so every hop of a redirect, is checked by the policy (``outbound.client``):
a host resolving to a loopback, private, link-local or otherwise non-public address is refused
unless ``SLUICE_EGRESS_ALLOW`` (or the deprecated ``SLUICE_FETCH_ALLOW_HOSTS``) names it. GitHub
"blob" URLs are read from their raw form, as Pipedream accepts them.
"""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urljoin, urlsplit

import httpx

from sluice import errors
from sluice.domain import egress
from sluice.engine import outbound
from sluice.runtime.egress import Resolver

_BLOB = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/blob/(.+)$")


def raw_url(url: str) -> str:
    m = _BLOB.match(url)
    if m:
        return f"https://raw.githubusercontent.com/{m.group(1)}/{m.group(2)}/{m.group(3)}"
    return url


async def fetch_text(
    url: str,
    *,
    time_limit: float,
    max_bytes: int,
    policy: egress.EgressPolicy = egress.EgressPolicy(),
    max_redirects: int = 5,
    resolver: Resolver | None = None,
) -> str:
    """The body of ``url`` (following at most ``max_redirects`` redirects) as text.

    Raises ``FetchFailed`` (a refusal by ``policy`` included) or ``PayloadTooLarge``.
    """
    current = raw_url(url)
    try:
        async with (
            asyncio.timeout(time_limit),
            outbound.client(
                policy, resolver=resolver, follow_redirects=False, timeout=time_limit
            ) as client,
        ):
            for _ in range(max_redirects + 1):
                parts = urlsplit(current)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise errors.FetchFailed(
                        f"component_url must be an http(s) URL, not {current!r}",
                        field="component_url",
                    )
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
    except errors.EgressRefused as exc:
        raise errors.FetchFailed(
            f"component_url: {outbound.explain(exc)} (Sluice fetches components only from "
            "public addresses)",
            field="component_url",
        ) from exc
    except TimeoutError as exc:
        raise errors.FetchFailed(
            f"fetching {url} took longer than {time_limit:g} s", field="component_url"
        ) from exc
    except httpx.HTTPError as exc:
        raise errors.FetchFailed(f"fetching {url} failed: {exc}", field="component_url") from exc
