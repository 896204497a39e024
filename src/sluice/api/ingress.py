"""Generated HTTP endpoints of sources: ``/e/{endpoint_id}`` and ``/e/{endpoint_id}/{path}``,
any method, no API key (endpoints are public, as Pipedream's are). See docs/api.md,
"HTTP endpoints".

Served by an ASGI middleware in front of the router rather than by routes: every method
reaches it (WebDAV's too), nothing parses the body before the size check, and the hot path
skips routing and the exception middleware, which cost as much CPU as the endpoint itself.
So errors are rendered here, with the API's one table (``api.errors.render``); anything else
raised reaches the app's 500 handler as usual.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from sluice import errors
from sluice.api import errors as api_errors
from sluice.domain.http_events import Answer, Refusal
from sluice.engine.ingress import IncomingRequest
from sluice.platform import Platform

PREFIX = "/e/"


class Endpoints:
    """ASGI middleware: ``/e/…`` requests are answered here, the rest pass on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if scope["type"] != "http" or not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        endpoint_id, _, rest = path[len(PREFIX) :].partition("/")
        request = Request(scope, receive)
        try:
            response = await endpoint(request, endpoint_id, "/" + rest)
        except errors.SluiceError as exc:
            response = api_errors.render(exc)
        await response(scope, receive, send)


async def endpoint(request: Request, endpoint_id: str, path: str) -> Response:
    platform: Platform = request.app.state.platform
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    if request.method == "OPTIONS":
        return _render(await platform.ingress.preflight(endpoint_id, headers))

    async def read_body(limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                break  # over the limit: the rest is never read
        return b"".join(chunks)

    result = await platform.ingress.accept(
        endpoint_id,
        IncomingRequest(
            method=request.method,
            path=path,
            query_string=request.scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            read_body=read_body,
        ),
    )
    if isinstance(result, Refusal):
        return api_errors.error_response(result.status, result.message, result.code)
    return _render(result)


def _render(answer: Answer) -> Response:
    response = Response(content=answer.body, status_code=answer.status)
    response.raw_headers.extend(
        (name.encode("latin-1"), value.encode("utf-8")) for name, value in answer.headers
    )
    return response
