"""The one place errors become HTTP answers, and the one JSON error shape.

Every 4xx/5xx body is ``{"error": "<message a person can act on>", "code": "<stable code>"}``,
plus ``"field"`` when one input is at fault and ``"details"`` when there is more to show (a
hook's error and logs). ``error`` is a string so scripts written for Pipedream's
``{"error": "..."}`` keep working. See docs/errors.md.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match

from sluice import errors, metrics
from sluice.api.bodies import SafeJSONResponse
from sluice.domain.states import Unanswered
from sluice.web import render as web_render

log = logging.getLogger(__name__)

STATUS: dict[type[errors.SluiceError], int] = {
    errors.InvalidRequest: 400,
    errors.InvalidComponent: 400,
    errors.InvalidProps: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.PayloadTooLarge: 413,
    errors.RateLimited: 429,
    # 507 Insufficient Storage: nothing is wrong with the request; the account is full.
    errors.QuotaExceeded: 507,
    errors.NotSupported: 501,
    errors.ComponentLoadFailed: 400,
    errors.DependencyInstallFailed: 400,
    errors.FetchFailed: 400,
    errors.HookFailed: 400,
    errors.ReconnectNeeded: 409,
    errors.OAuthRefused: 400,
    errors.OAuthUnavailable: 502,
    errors.RunnerUnavailable: 503,
    errors.DeliveryFailed: 502,
    errors.NotReady: 503,
    errors.StorageUnavailable: 503,
    errors.Overloaded: 503,
    errors.LeaseLost: 503,
    errors.InternalError: 500,
    # Never answered in practice: the client is gone (nginx's 499 is not a status to send).
    errors.ClientDisconnected: 400,
    # The CLI's own, raised in the client; reaching the server would be a bug.
    errors.CliError: 500,
}

_HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


#: Sluice's answer to an HTTP endpoint's client in place of the run's own: status and code.
UNANSWERED: dict[Unanswered, tuple[int, str]] = {
    Unanswered.NO_RESPONSE: (504, "no_response"),
    Unanswered.NO_WORKFLOW_RESPONSE: (400, "no_response"),
    Unanswered.GONE: (404, "not_found"),
    Unanswered.WORKFLOW_FAILED: (500, "workflow_failed"),
    Unanswered.RUNNER_CRASHED: (503, "runner_crashed"),
    Unanswered.RETRYING: (503, "retrying"),
    Unanswered.INVALID_STATUS: (500, "invalid_response_status"),
    Unanswered.INVALID_RESPONSE: (500, "invalid_response"),
}


def unanswered(reason: Unanswered, message: str) -> JSONResponse:
    """The error answer an endpoint's client gets when the run gave none of its own."""
    status, code = UNANSWERED[reason]
    return error_response(status, message, code)


def status_of(exc: errors.SluiceError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def body(
    message: str, code: str, *, field: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"error": message, "code": code}
    if field:
        out["field"] = field
    if details:
        out["details"] = details
    return out


def error_response(status: int, message: str, code: str, **extra: Any) -> JSONResponse:
    metrics.api_error(code)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return SafeJSONResponse(body(message, code, **extra), status_code=status, headers=headers)


def _is_page(request: Request) -> bool:
    """A browser asking for a page of the web UI (not /v1, not a script's request)."""
    return not request.url.path.startswith("/v1") and "text/html" in request.headers.get(
        "accept", ""
    )


async def _sluice_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.SluiceError)
    if _is_page(request):
        # A page of the web UI: the error as a page, with the same status.
        return web_render.error_page(request, exc.message, exc.code, status_of(exc))
    return render(exc)


def render(exc: errors.SluiceError) -> JSONResponse:
    """The answer to a ``SluiceError`` (also for the HTTP endpoints, served before routing)."""
    status = status_of(exc)
    # Not ready (storage down or full, shedding load): logged where it is found, once per
    # spell, not here per request (a flood of requests would be a flood of stack traces).
    if status >= 500 and not isinstance(exc, errors.NotReady):
        log.error("request failed: %s", exc.message, exc_info=exc.__cause__ or exc)
    response = error_response(status, exc.message, exc.code, field=exc.field, details=exc.details)
    if isinstance(exc, errors.RateLimited | errors.NotReady):
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
    return response


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    if first.get("type") == "json_invalid":
        return error_response(
            400,
            f"the body is not valid JSON: {first.get('ctx', {}).get('error', '')}".rstrip(": "),
            "invalid_json",
        )
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    field = ".".join(loc) or None
    where = first.get("loc", ("body",))[0]
    msg = str(first.get("msg", "invalid value"))
    if first.get("type") == "missing" and field is None and where == "body":
        message = "a JSON body is required"
    elif first.get("type") == "missing":
        message = f"{field} is required" + (" (query parameter)" if where == "query" else "")
    elif first.get("type") in ("model_attributes_type", "dict_type") and not loc:
        message = "the body must be a JSON object"
    else:
        shown = json.dumps(first.get("input"), default=str)[:80]
        message = f"{field or where}: {msg} (got {shown})"
    return error_response(400, message, "invalid_request", field=field)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "error" if exc.status_code < 500 else "internal_error")
    if exc.status_code == 404:
        message = f"no such route: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    if _is_page(request):
        return web_render.error_page(request, message, code, exc.status_code)
    response = error_response(exc.status_code, message, code)
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    return response


def allowed_methods(request: Request) -> list[str]:
    """Every method the request's path has: Starlette's 405 names only those of the first
    route that matched the path, and a path often has one route per method."""
    routes = request.app.router.routes
    methods = {
        method
        for method in ("DELETE", "GET", "PATCH", "POST", "PUT")
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    }
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return error_response(500, "an internal error occurred; it has been logged", "internal_error")


def install(app: FastAPI) -> None:
    app.add_exception_handler(errors.SluiceError, _sluice_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
