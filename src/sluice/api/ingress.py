"""Generated HTTP endpoints of sources and workflows: ``/e/{endpoint_id}`` and
``/e/{endpoint_id}/{path}``, or every path of ``<id>.<endpoint domain>`` with a per-endpoint
``SLUICE_ENDPOINT_BASE_URL``; any method, no API key (endpoints are public, as Pipedream's
are). See docs/api.md, "HTTP endpoints", and ``domain/endpoint_origins``.

Served in front of FastAPI's own middleware (telemetry, the body limit, the error middleware)
and routing: every method reaches it (WebDAV's too), nothing parses the body before the size
check, and the hot path costs what it does, not what the framework around it does (measured:
FastAPI's stack in front cost a third of the endpoint's CPU). Most requests come straight off
uvicorn's parser (``Direct``, ``serve_direct``: no ASGI cycle at all); the rest as plain ASGI
from ``App.__call__`` (``serve``). Either way errors are rendered here, with the API's one
table (``api.errors.render``); anything else raised is logged and answered 500
``internal_error``, as the API's handler does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from sluice import errors, metrics, public_url
from sluice.api import connections
from sluice.api import errors as api_errors
from sluice.domain import endpoint_origins, http_events
from sluice.domain.http_events import Answer, Refusal
from sluice.platform import IncomingRequest, Platform

log = logging.getLogger(__name__)

PREFIX = "/e/"

#: The default answer (no ``customResponse``), its ASGI messages built once.
_DEFAULT = http_events.DEFAULT_ANSWER
_DEFAULT_START: Message = {
    "type": "http.response.start",
    "status": _DEFAULT.status,
    "headers": [
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in _DEFAULT.headers),
        (b"content-length", str(len(_DEFAULT.body)).encode("ascii")),
    ],
}
_DEFAULT_BODY: Message = {"type": "http.response.body", "body": _DEFAULT.body}
#: The same answer as bytes, for the requests taken off the parser (``Direct``).
_DEFAULT_BYTES = connections.Prebuilt(_DEFAULT.status, _DEFAULT_START["headers"], _DEFAULT.body)


@dataclass(frozen=True)
class Target:
    """The endpoint a request is for, the path under it, and whether it came to the endpoint's
    own host (``endpoint_origins``: what may cross between it and the browser)."""

    endpoint_id: str
    path: str
    own_origin: bool


def target(
    scope: Scope, base: endpoint_origins.EndpointBase, proxies: public_url.TrustedProxies
) -> Target | None:
    """The endpoint ``scope`` is a request to: any request to a host of the per-endpoint
    template (``SLUICE_ENDPOINT_BASE_URL=https://{id}.…``), whatever its path, or ``/e/<id>…``
    on any other host; else None."""
    if scope["type"] != "http":
        return None
    if base.per_endpoint_hosts:
        endpoint_id = endpoint_origins.endpoint_of_host(base, _host(scope, proxies))
        if endpoint_id is not None:
            return Target(endpoint_id, scope.get("path") or "/", own_origin=True)
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    if not path.startswith(PREFIX):
        return None
    endpoint_id, _, sub_path = path[len(PREFIX) :].partition("/")
    return Target(endpoint_id, "/" + sub_path, own_origin=False)


def _host(scope: Scope, proxies: public_url.TrustedProxies) -> str:
    """The request's ``Host``, or the first ``X-Forwarded-Host`` from a trusted proxy."""
    headers = dict(scope["headers"])
    forwarded = headers.get(b"x-forwarded-host")
    if forwarded and proxies.trusts((scope.get("client") or (None,))[0]):
        return str(forwarded.decode("latin-1").split(",")[0])
    return str(headers.get(b"host", b"").decode("latin-1"))


class Direct:
    """The endpoints' requests taken straight off uvicorn's HTTP parser
    (``connections.Direct``; the lifespan state's ``connections.DIRECT``): the ASGI cycle,
    ``App.__call__`` and uvicorn's checks of each ASGI message are skipped, and the answer goes
    out in one write: a source's request cost 4-14% less CPU than through uvicorn's cycle
    (``bench/asgi_servers.py --role api --interleave 6 --also <base>``; bench/README.md,
    issue 29). Requests the protocol does not hand over (``connections``) come through
    ``serve``."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.base = platform.settings.endpoint_base
        self.proxies = platform.settings.proxies

    def take(
        self, scope: dict[str, Any]
    ) -> Callable[[connections.DirectCycle], Awaitable[None]] | None:
        to = target(scope, self.base, self.proxies)
        if to is None:
            return None
        return functools.partial(serve_direct, self.platform, to)


async def serve_direct(platform: Platform, to: Target, cycle: connections.DirectCycle) -> None:
    """Answer one endpoint request whose body is in ``cycle``, counted in
    ``sluice_http_requests`` (kind ``endpoint``)."""
    body = cycle.request_body()

    async def read_body(limit: int) -> bytes:
        return body

    outcome = await _outcome(platform, to, cycle.scope, read_body)  # type: ignore[arg-type]
    if outcome is _DEFAULT:
        metrics.request("endpoint", _DEFAULT.status)
        cycle.answer_prebuilt(_DEFAULT_BYTES)
        return
    response = _render(outcome, to.own_origin) if isinstance(outcome, Answer) else outcome
    metrics.request("endpoint", response.status_code)
    cycle.answer(response.status_code, response.raw_headers, bytes(response.body))


async def serve(platform: Platform, to: Target, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one endpoint request as ASGI, counted in ``sluice_http_requests`` (kind
    ``endpoint``)."""

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

    try:
        outcome = await _outcome(platform, to, scope, read_body)
    except errors.ClientDisconnected:
        return
    if outcome is _DEFAULT:
        # The prebuilt messages sent as they are (a wrapper per message was ~4% of an
        # ingested request's CPU).
        metrics.request("endpoint", _DEFAULT.status)
        await send(_DEFAULT_START)
        await send(_DEFAULT_BODY)
        return
    response = _render(outcome, to.own_origin) if isinstance(outcome, Answer) else outcome
    metrics.request("endpoint", response.status_code)
    await response(scope, receive, send)


async def _outcome(
    platform: Platform, to: Target, scope: Scope, read_body: Callable[[int], Awaitable[bytes]]
) -> Answer | Response:
    """The endpoint's answer, or the error answer rendered with the API's one table
    (``ClientDisconnected`` is raised: there is no one to answer)."""
    try:
        headers = endpoint_origins.request_headers(
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            own_origin=to.own_origin,
        )
        method: str = scope["method"]
        answer: Answer | Refusal
        if method == "OPTIONS":
            answer = await platform.ingress.preflight(to.endpoint_id, headers)
        else:
            answer = await platform.ingress.accept(
                to.endpoint_id,
                IncomingRequest(
                    method=method,
                    path=to.path,
                    query_string=scope.get("query_string", b"").decode("latin-1"),
                    headers=headers,
                    read_body=read_body,
                    origin=lambda: _origin(scope, platform),
                ),
            )
    except errors.ClientDisconnected:
        raise
    except errors.SluiceError as exc:
        return api_errors.render(exc)
    except Exception:
        log.exception("unexpected error answering endpoint %s", to.endpoint_id)
        return api_errors.error_response(
            500, "an internal error occurred; it has been logged", "internal_error"
        )
    if isinstance(answer, Answer):
        return answer
    return api_errors.unanswered(answer.reason, answer.message)


def _origin(scope: Scope, platform: Platform) -> tuple[str, str]:
    """The base URL the request came to and its client's address (``SLUICE_TRUSTED_PROXIES``'
    forwarded headers applied)."""
    base = public_url.base_url(scope, platform.settings.proxies)
    return base.rstrip("/"), str((scope.get("client") or ("",))[0] or "")


def _render(answer: Answer, own_origin: bool) -> Response:
    response = Response(content=answer.body, status_code=answer.status)
    response.raw_headers.extend(
        (name.encode("latin-1"), value.encode("utf-8"))
        for name, value in endpoint_origins.answer_headers(answer.headers, own_origin=own_origin)
    )
    return response
