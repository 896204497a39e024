"""Request and response bodies of the ``/v1`` API, at the ASGI edge.

Requests: a body over ``SLUICE_API_MAX_BODY_BYTES`` is 413 ``payload_too_large`` (a too large
``Content-Length`` before a byte is read; else counted while read, and reading stops there),
and a JSON body that storage or the Node runner cannot take is 400 naming the field (a lone
surrogate, a number beyond a 64-bit float, nesting deeper than ``text.MAX_DEPTH``) before any
route sees it. The checked body is then handed to FastAPI as one message.

Responses: JSON is UTF-8 unless a value holds a lone surrogate (an event a component emitted:
JavaScript strings may); then it is written with ASCII escapes (``"\\ud800"``), which every
JSON parser reads back as the same string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import Message, Receive, Scope

from sluice import errors
from sluice.domain import http_events, text

#: What Python reads as a lone surrogate, a non-finite float, or deep nesting: only bodies with
#: one of these are parsed here (the routes parse every body anyway).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_HUGE_NUMBER = re.compile(rb"[eE]\+?[0-9]{3}|[0-9]{300}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """JSON text that encodes as UTF-8: ASCII escapes when a string holds a lone surrogate."""
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if _SURROGATE.search(out):
        out = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return out


class SafeJSONResponse(JSONResponse):
    """FastAPI's JSON answer, that never fails on a lone surrogate (see ``dumps``)."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(
                content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
            ).encode("ascii")


async def checked_receive(scope: Scope, receive: Receive, limit: int) -> Receive:
    """Read and check the request's body; a ``receive`` that gives it to the app, then
    whatever comes next (a disconnect). Raises ``SluiceError`` when the body is refused."""
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
    declared = http_events.declared_length(headers)
    if declared is not None and declared > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    first: Message | None = None
    while True:
        message = await receive()
        if message["type"] != "http.request":
            first = message  # the client went away: the app sees it as it would have
            break
        chunk: bytes = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)  # the rest is never read
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if body:
        _check_json(body)
    pending: list[Message] = [first or {"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _check_json(body: bytes) -> None:
    suspicious = (
        _SURROGATE_ESCAPE.search(body) is not None
        or _HUGE_NUMBER.search(body) is not None
        or body.count(b"[") + body.count(b"{") > text.MAX_DEPTH
    )
    if not suspicious:
        return
    try:
        value = json.loads(body)
    except RecursionError as exc:
        raise errors.InvalidRequest(
            f"the JSON body is nested more than {text.MAX_DEPTH} levels deep"
        ) from exc
    except ValueError:
        return  # not JSON: the route says so, in its words
    problem = text.json_problem(value)
    if problem is not None:
        field, what = problem
        raise errors.InvalidRequest(f"{field or 'the body'} holds {what}", field=field or None)


def _too_large(limit: int) -> errors.PayloadTooLarge:
    return errors.PayloadTooLarge(
        f"the request body is over the API's limit of {limit} bytes (SLUICE_API_MAX_BODY_BYTES)"
    )
