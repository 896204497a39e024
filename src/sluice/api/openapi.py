"""``/openapi.json``: FastAPI's document, with the answers the API really gives.

FastAPI declares only 200 and a 422 it never sends (``api/errors.py`` answers a bad request
with 400). Every operation here lists the statuses of ``api/errors.py`` instead, each with the
one error shape (``{"error", "code"}``, docs/errors.md); its successful answer's shape, its
group and the API key it needs are ``api/openapi_shapes.py``'s (``/docs`` shows the groups
and an Authorize button).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from sluice.api import openapi_shapes as shapes

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "code"],
    "properties": {
        "error": {"type": "string", "description": "What was wrong, for a person."},
        "code": {"type": "string", "description": "A stable code (docs/errors.md)."},
        "field": {"type": "string", "description": "The input at fault."},
        "details": {"type": "object", "description": "More to show."},
    },
}

#: The statuses any route may answer with, and why (docs/errors.md has every code).
ERRORS: dict[str, str] = {
    "400": "The body or a parameter is invalid (invalid_json, invalid_request, invalid_props…).",
    "401": "No API key, or a wrong or revoked one (unauthorized).",
    "403": "The key may not do this (forbidden: admin routes).",
    "404": "No such route or resource, or another account's (not_found).",
    "405": "The path exists, not with this method (method_not_allowed); see Allow.",
    "409": "The resource's state forbids the request (conflict, reconnect_needed).",
    "413": "The body or a value is over its limit (payload_too_large).",
    "429": "Too many requests (rate_limited); see Retry-After.",
    "500": "A bug in Sluice, logged on the server (internal_error).",
    "501": "A Pipedream feature Sluice does not have (not_supported); the error names the "
    "Sluice equivalent.",
    "502": "An outside service failed (oauth_unavailable, delivery failed).",
    "503": "The Node runner could not be reached or crashed (runner_unavailable).",
}

_REF = {"$ref": "#/components/schemas/Error"}
#: RFC 6749 §5.2's error body, which the OAuth token and revoke routes answer with.
OAUTH_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "invalid_request, invalid_client, …"},
        "error_description": {"type": "string", "description": "What was wrong, for a person."},
    },
}
_OAUTH_REF = {"$ref": "#/components/schemas/OAuthError"}
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app``, built once and kept (as FastAPI's own is)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    parts = schema.setdefault("components", {})
    components = parts.setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    components["OAuthError"] = OAUTH_ERROR_SCHEMA
    components.update(shapes.schemas())
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    parts["securitySchemes"] = {"ApiKey": shapes.SECURITY_SCHEME}
    schema["security"] = [{"ApiKey": []}]
    schema["tags"] = [{"name": n, "description": d} for n, d in shapes.TAGS]
    for route, path in schema.get("paths", {}).items():
        for method in _METHODS:
            if method in path:
                _describe(route, method, path[method])
                _declare_errors(path[method], shapes.oauth_errors(route))
    app.openapi_schema = schema
    return schema


def _describe(route: str, method: str, operation: dict[str, Any]) -> None:
    """The operation's group, its successful answer's shape, and no key for public routes."""
    group = shapes.tag(route)
    if group is not None:
        operation["tags"] = [group]
    if shapes.is_public(route):
        operation["security"] = []
    shape = shapes.answer(method, route)
    if shape is None:
        return
    for status, response in operation.get("responses", {}).items():
        content = response.get("content", {}).get("application/json")
        if status.startswith("2") and content is not None:
            content["schema"] = shape


def _declare_errors(operation: dict[str, Any], oauth: bool = False) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)
    for status, description in ERRORS.items():
        ref = _OAUTH_REF if oauth and status in ("400", "401") else _REF
        if ref is _OAUTH_REF:
            description = "RFC 6749 §5.2: invalid_request, invalid_client, unsupported_grant_type…"
        responses.setdefault(
            status,
            {"description": description, "content": {"application/json": {"schema": ref}}},
        )


def install(app: FastAPI) -> None:
    app.openapi = lambda: document(app)  # type: ignore[method-assign]
