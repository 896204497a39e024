"""Pipedream's common parameters ``include`` and ``exclude`` on ``GET /v1/…``: the objects of
an answer's ``data`` (one, or each of a list) keep only the fields ``include`` names
(comma-separated), or lose those ``exclude`` names. Other answers (errors, SSE) pass as they
are. Applied only when the query names one, so other requests pay nothing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from starlette.types import Message, Scope, Send


def wanted(scope: Scope) -> tuple[set[str] | None, set[str]] | None:
    """``(include, exclude)`` of a ``GET /v1`` request that names either, else None."""
    if scope.get("method") != "GET" or not scope.get("path", "").startswith("/v1/"):
        return None
    query = scope.get("query_string", b"")
    if b"include=" not in query and b"exclude=" not in query:
        return None
    params = parse_qs(query.decode("latin-1"))

    def names(key: str) -> set[str]:
        return {n.strip() for v in params.get(key, []) for n in v.split(",") if n.strip()}

    include, exclude = names("include"), names("exclude")
    if not include and not exclude:
        return None
    return (include or None), exclude


def _pick(item: Any, include: set[str] | None, exclude: set[str]) -> Any:
    if not isinstance(item, dict):
        return item
    return {k: v for k, v in item.items() if (include is None or k in include) and k not in exclude}


def filtering(send: Send, include: set[str] | None, exclude: set[str]) -> Send:
    """``send``, with a JSON answer's ``data`` filtered (the body is held until complete)."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def sending(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            given = dict(message.get("headers") or [])
            is_json = given.get(b"content-type", b"").startswith(b"application/json")
            if message["status"] < 300 and is_json:
                start = message
                return
        elif start is not None and message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = json.loads(b"".join(chunks))
            data = body.get("data") if isinstance(body, dict) else None
            if isinstance(data, list):
                body["data"] = [_pick(item, include, exclude) for item in data]
            elif isinstance(data, dict):
                body["data"] = _pick(data, include, exclude)
            out = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            headers = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
            headers.append((b"content-length", str(len(out)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": out})
            return
        await send(message)

    return sending
