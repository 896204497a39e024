"""Generated HTTP endpoints of sources and workflows: ``/e/{endpoint_id}`` and
``/e/{endpoint_id}/{path}``, any method, no API key (endpoints are public, as Pipedream's are).
See docs/api.md, "HTTP endpoints".

Served as plain ASGI by ``App.__call__``, before FastAPI's own middleware (telemetry, the body
limit, the error middleware) and routing: every method reaches it (WebDAV's too), nothing
parses the body before the size check, and the hot path costs what it does, not what the
framework around it does (measured: FastAPI's stack in front cost a third of the endpoint's
CPU). So errors are rendered here, with the API's one table (``api.errors.render``); anything
else raised is logged and answered 500 ``internal_error``, as the API's handler does.
"""

from __future__ import annotations

import logging

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from sluice import errors, public_url
from sluice.api import errors as api_errors
from sluice.domain import http_answers, http_events
from sluice.domain.http_answers import Answer, Refusal
from sluice.platform import IncomingRequest, Platform

log = logging.getLogger(__name__)

PREFIX = "/e/"

#: The default answer (no ``customResponse``), its ASGI messages built once.
_DEFAULT = http_answers.DEFAULT_ANSWER
_DEFAULT_START: Message = {
    "type": "http.response.start",
    "status": _DEFAULT.status,
    "headers": [
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in _DEFAULT.headers),
        (b"content-length", str(len(_DEFAULT.body)).encode("ascii")),
    ],
}
_DEFAULT_BODY: Message = {"type": "http.response.body", "body": _DEFAULT.body}


def endpoint_path(scope: Scope) -> str | None:
    """The path after ``/e/`` when ``scope`` is a request to an endpoint, else None."""
    if scope["type"] != "http":
        return None
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path[len(PREFIX) :] if path.startswith(PREFIX) else None


async def serve(platform: Platform, rest: str, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one endpoint request (``rest``: the path after ``/e/``)."""
    endpoint_id, _, sub_path = rest.partition("/")
    started = False

    async def send_tracked(message: Message) -> None:
        nonlocal started
        started = True
        await send(message)

    try:
        answer = await _answer(platform, endpoint_id, "/" + sub_path, scope, receive)
        if answer is _DEFAULT:
            await send_tracked(_DEFAULT_START)
            await send_tracked(_DEFAULT_BODY)
            return
        response = (
            _render(answer)
            if isinstance(answer, Answer)
            else api_errors.unanswered(answer.reason, answer.message)
        )
    except errors.ClientDisconnected:
        return
    except errors.SluiceError as exc:
        response = api_errors.render(exc)
    except Exception:
        if started:
            raise
        log.exception("unexpected error answering endpoint %s", endpoint_id)
        response = api_errors.error_response(
            500, "an internal error occurred; it has been logged", "internal_error"
        )
    await response(scope, receive, send_tracked)


async def _answer(
    platform: Platform, endpoint_id: str, path: str, scope: Scope, receive: Receive
) -> Answer | Refusal:
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
    headers = http_events.without_own_cookies(headers)
    method: str = scope["method"]
    if method == "OPTIONS":
        return await platform.ingress.preflight(endpoint_id, headers)

    async def read_body(limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: the client went away
                raise errors.ClientDisconnected
            chunk: bytes = message.get("body", b"")
            if chunk:
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    break  # over the limit: the rest is never read
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    return await platform.ingress.accept(
        endpoint_id,
        IncomingRequest(
            method=method,
            path=path,
            query_string=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            read_body=read_body,
            origin=lambda: _origin(scope, platform),
        ),
    )


def _origin(scope: Scope, platform: Platform) -> tuple[str, str]:
    """The base URL the request came to and its client's address (``SLUICE_TRUSTED_PROXIES``'
    forwarded headers applied)."""
    base = public_url.base_url(scope, platform.settings.proxies)
    return base.rstrip("/"), str((scope.get("client") or ("",))[0] or "")


def _render(answer: Answer) -> Response:
    response = Response(content=answer.body, status_code=answer.status)
    response.raw_headers.extend(
        (name.encode("latin-1"), value.encode("utf-8")) for name, value in answer.headers
    )
    return response
