"""``$.send.http``: one HTTP request, to a destination the egress policy allows."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from sluice import errors
from sluice.domain import egress
from sluice.engine.outbound import http_clients
from sluice.engine.outbound.destinations.config import elapsed_ms, invalid, mapping, string

log = logging.getLogger(__name__)

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


@dataclass(frozen=True)
class HttpSend:
    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, Any]
    content: bytes | None
    auth: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """``POST https://host/path``: no credentials, no query string."""
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        return f"{self.method} {parts.scheme}://{host}{parts.path}"


def _string_map(kind: str, name: str, value: object, *, lists: bool) -> dict[str, Any]:
    """Headers or params: string keys; null values dropped (as axios drops undefined)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(kind, name, "must be an object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            continue
        scalars = item if lists and isinstance(item, list) else [item]
        if not all(isinstance(s, str | int | float | bool) for s in scalars):
            raise invalid(kind, f"{name}.{key}", "must be a string, number or boolean")
        if isinstance(item, bool):
            item = "true" if item else "false"
        out[str(key)] = item if lists else str(item)
    return out


def check_http(config: object) -> HttpSend:
    """Validate a ``$.send.http`` config.

    ``method`` is one of ``HTTP_METHODS``, in capitals as Pipedream requires; when it is left
    out it is POST if there is ``data``, else GET. ``data``: an object or array is sent as JSON
    (``Content-Type: application/json``), a string as it is (``text/plain`` unless ``headers``
    set a type). Redirects are not followed: a 3xx is the outcome.
    """
    cfg = mapping("http", config)
    data = cfg.get("data")
    method = string("http", cfg, "method", default="POST" if data is not None else "GET")
    if method not in HTTP_METHODS:
        hint = "; methods are uppercase" if method.upper() in HTTP_METHODS else ""
        raise invalid("http", "method", f"must be one of {', '.join(HTTP_METHODS)}{hint}")
    url = string("http", cfg, "url")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise invalid("http", "url", "must be an http(s) URL with a host")
    headers = _string_map("http", "headers", cfg.get("headers"), lists=False)
    params = _string_map("http", "params", cfg.get("params"), lists=True)
    has_type = any(k.lower() == "content-type" for k in headers)
    content: bytes | None = None
    if isinstance(data, str):
        content = data.encode()
        if not has_type:
            headers["Content-Type"] = "text/plain; charset=utf-8"
    elif isinstance(data, dict | list):
        try:
            content = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise invalid("http", "data", f"is not JSON-serializable: {exc}") from None
        if not has_type:
            headers["Content-Type"] = "application/json"
    elif data is not None:
        raise invalid("http", "data", "must be a string, an object or an array")
    auth = cfg.get("auth")
    credentials = None
    if auth is not None:
        if not isinstance(auth, dict):
            raise invalid("http", "auth", "must be an object {username, password}")
        username, password = auth.get("username"), auth.get("password")
        if not isinstance(username, str) or not isinstance(password, str):
            raise invalid("http", "auth", "must be an object {username, password} of strings")
        credentials = (username, password)
    return HttpSend(method, url, headers, params, content, credentials)


async def send_http(
    config: dict[str, Any],
    *,
    time_limit: float,
    policy: egress.EgressPolicy = egress.EgressPolicy(),
    client: httpx.AsyncClient | None = None,
) -> dict[str, Any]:
    """Make the request once, to a destination ``policy`` allows.

    ``{"status": "sent", "http_status": 503, "ok": False, "duration_ms": 12}`` (``ok``: 2xx), or
    ``{"status": "failed", "error": "...", "duration_ms": 5000}`` when no response came (time-out,
    refused connection, TLS, or the egress policy refused the destination:
    ``$.send.http: GET http://127.0.0.1:8080/x refused: 127.0.0.1 is a loopback address; ...``).
    ``client`` is used as given and not closed (and ``policy`` ignored): build it with
    ``http_clients.client(policy)``.
    """
    send = check_http(config)
    started = time.monotonic()
    try:
        if client is None:
            async with http_clients.client(policy, follow_redirects=False) as own:
                status = await _request(own, send, time_limit)
        else:
            status = await _request(client, send, time_limit)
    except errors.EgressRefused as exc:
        error = f"$.send.http: {send.shown} refused: {http_clients.explain(exc)}"
        return _failed_http(error, started)
    except (TimeoutError, httpx.TimeoutException):
        error = f"$.send.http: {send.shown} timed out after {time_limit:g} s"
        return _failed_http(error, started)
    except httpx.HTTPError as exc:
        error = f"$.send.http: {send.shown} failed: {type(exc).__name__}: {exc}"
        return _failed_http(error, started)
    duration_ms = elapsed_ms(started)
    log.info(
        "$.send.http delivered",
        extra={"action": "send_http", "http_status": status, "duration_ms": duration_ms},
    )
    ok = 200 <= status < 300
    return {"status": "sent", "http_status": status, "ok": ok, "duration_ms": duration_ms}


async def _request(client: httpx.AsyncClient, send: HttpSend, time_limit: float) -> int:
    # httpx's timeout is per operation (connect, each read); asyncio's bounds the whole request.
    async with (
        asyncio.timeout(time_limit),
        client.stream(
            send.method,
            # Merged into the URL's own query (``params=`` alone would replace it); a key given
            # in both takes the value from ``params``.
            httpx.URL(send.url).copy_merge_params(send.params),
            headers=send.headers,
            content=send.content,
            auth=httpx.BasicAuth(*send.auth) if send.auth else None,
            timeout=time_limit,
            follow_redirects=False,
        ) as response,
    ):
        # The body is not read: only the status matters, and it may be large.
        return response.status_code


def _failed_http(error: str, started: float) -> dict[str, Any]:
    log.info("$.send.http failed", extra={"action": "send_http_failed", "error": error})
    return {"status": "failed", "error": error, "duration_ms": elapsed_ms(started)}
