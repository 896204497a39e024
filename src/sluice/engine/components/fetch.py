"""Fetching ``component_url``: http(s) only, destinations the egress policy allows, bounded size
and time.

Every connection, so every hop of a redirect, is checked by the policy (``http_clients.client``):
a host resolving to a loopback, private, link-local or otherwise non-public address is refused
unless ``SLUICE_EGRESS_ALLOW`` (or the deprecated ``SLUICE_FETCH_ALLOW_HOSTS``) names it. GitHub
"blob" URLs are read from their raw form, as Pipedream accepts them.

A component is fetched with the files it imports by relative path (``fetch_component``:
Pipedream's own example, the RSS source, imports ``../../rss.app.mjs``): from the same origin
only, at most ``MAX_FILES`` files and ``max_bytes`` in all, within one time limit.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

import httpx

from sluice import errors
from sluice.domain import egress, imports
from sluice.engine.outbound import http_clients
from sluice.runtime.egress import Resolver

_BLOB = re.compile(r"^https://github\.com/([^/]+)/([^/]+)/blob/(.+)$")


#: The most files one ``component_url`` brings (the entry and what it imports, transitively).
MAX_FILES = 50


@dataclass(frozen=True)
class Fetched:
    """A component fetched with its relative imports, laid out under their common directory."""

    entry_path: str
    code: str
    #: The other files, by path relative to that directory.
    files: dict[str, str]


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
            http_clients.client(
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
            f"component_url: {http_clients.explain(exc)} (Sluice fetches components only from "
            "public addresses)",
            field="component_url",
        ) from exc
    except TimeoutError as exc:
        raise errors.FetchFailed(
            f"fetching {url} took longer than {time_limit:g} s", field="component_url"
        ) from exc
    except httpx.HTTPError as exc:
        raise errors.FetchFailed(f"fetching {url} failed: {exc}", field="component_url") from exc


async def fetch_component(
    url: str,
    *,
    time_limit: float,
    max_bytes: int,
    policy: egress.EgressPolicy = egress.EgressPolicy(),
    resolver: Resolver | None = None,
) -> Fetched:
    """The entry at ``url`` and every file it reaches by relative import (``./``, ``../``), at
    most ``MAX_FILES`` files and ``max_bytes`` in all, each from the entry's origin.

    Raises ``FetchFailed`` or ``PayloadTooLarge`` as ``fetch_text`` does, naming the import.
    """
    entry = raw_url(url)
    origin = _origin(entry)
    texts: dict[str, str] = {}
    todo: list[tuple[str, str | None]] = [(entry, None)]
    total = 0
    try:
        async with asyncio.timeout(time_limit):
            while todo:
                target, imported_by = todo.pop(0)
                if target in texts:
                    continue
                if len(texts) >= MAX_FILES:
                    raise errors.FetchFailed(
                        f"component_url: the component imports more than {MAX_FILES} files "
                        "by relative path",
                        field="component_url",
                    )
                try:
                    text = await fetch_text(
                        target,
                        time_limit=time_limit,
                        max_bytes=max_bytes - total,
                        policy=policy,
                        resolver=resolver,
                    )
                except errors.PayloadTooLarge as exc:
                    raise errors.PayloadTooLarge(
                        f"component_url: the component and the files it imports are over "
                        f"{max_bytes} bytes",
                        field="component_url",
                    ) from exc
                except errors.FetchFailed as exc:
                    if imported_by is None:
                        raise
                    raise errors.FetchFailed(
                        f"{exc.message} (imported by {_path(imported_by)})", field="component_url"
                    ) from exc
                texts[target] = text
                total += len(text.encode())
                for ref in imports.find_imports(text):
                    if not ref.specifier.startswith(("./", "../")):
                        continue
                    found = urljoin(target, ref.specifier.split("?")[0].split("#")[0])
                    if _origin(found) != origin:
                        raise errors.FetchFailed(
                            f"component_url: {_path(target)} imports {ref.specifier!r}, "
                            "outside the component's origin",
                            field="component_url",
                        )
                    todo.append((found, target))
    except TimeoutError as exc:
        raise errors.FetchFailed(
            f"fetching {url} and its imports took longer than {time_limit:g} s",
            field="component_url",
        ) from exc
    return _laid_out(entry, texts)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _path(url: str) -> str:
    return posixpath.normpath(unquote(urlsplit(url).path)) or "/"


def _laid_out(entry: str, texts: dict[str, str]) -> Fetched:
    """The files under their common directory: ``/o/r/main/components/rss/sources/x/x.mjs``
    importing ``../../rss.app.mjs`` is ``sources/x/x.mjs`` beside ``rss.app.mjs``."""
    paths = {url: _path(url) for url in texts}
    root = posixpath.commonpath([posixpath.dirname(p) for p in paths.values()])
    files = {posixpath.relpath(paths[u], root): t for u, t in texts.items() if u != entry}
    return Fetched(posixpath.relpath(paths[entry], root), texts[entry], files)
