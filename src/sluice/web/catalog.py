"""Browse and search the public registry and the account's own components; a component's
page (props, description, code) with its deploy button."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.web import render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


def _kind(value: str | None) -> str | None:
    return value if value in ("source", "action") else None


@router.get("/registry")
async def registry(request: Request, q: str = "", type: str | None = None) -> Response:
    session = await sessions.required(request)
    found = await sessions.platform_of(request).registry_search(q[:200], component_type=_kind(type))
    context = {"components": found, "q": q, "type": _kind(type) or "", "where": "registry"}
    return render.page(request, "catalog.html", context, session=session)


@router.get("/components")
async def mine(request: Request, q: str = "", type: str | None = None) -> Response:
    session = await sessions.required(request)
    page = await sessions.platform_of(request).component_page(
        session.account.id, limit=100, before=None, after=None, component_type=_kind(type)
    )
    needle = q.strip().lower()
    found = [
        c
        for c in page.items
        if not needle or needle in f"{c.key or ''} {c.name} {c.description or ''}".lower()
    ]
    context = {"components": found, "q": q, "type": _kind(type) or "", "where": "mine"}
    return render.page(request, "catalog.html", context, session=session)


@router.get("/components/{key_or_id}")
async def component(request: Request, key_or_id: str) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    found = await platform.find_component(session.account.id, key_or_id)
    if found is None:
        versions = await platform.registry_search(key_or_id)
        found = next((c for c in versions if c.key == key_or_id), None)
    if found is None:
        raise errors.NotFound(f"component {key_or_id} not found")
    context = {"c": found}
    return render.page(request, "component.html", context, session=session)
