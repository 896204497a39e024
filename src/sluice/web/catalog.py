"""Browse and search the public registry and the account's own components (one row per key,
with its versions, what runs each, and delete for those nothing runs); a component's page
(props, description, code) with its deploy button."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.platform import SavedComponent
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


@dataclass
class Row:
    """One component of "My components": a key (or, without one, a single save), newest
    version first."""

    key: str | None
    versions: list[SavedComponent] = field(default_factory=list)

    @property
    def newest(self) -> SavedComponent:
        return self.versions[0]


def rows(components: list[SavedComponent]) -> list[Row]:
    """The account's saves (newest first) grouped by key, in order of their newest save."""
    by_key: dict[str, Row] = {}
    for c in components:
        by_key.setdefault(c.key or c.id, Row(c.key)).versions.append(c)
    return list(by_key.values())


@router.get("/components")
async def mine(request: Request, q: str = "", type: str | None = None) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    page = await platform.component_page(
        session.account.id, limit=100, before=None, after=None, component_type=_kind(type)
    )
    needle = q.strip().lower()
    found = [
        c
        for c in page.items
        if not needle or needle in f"{c.key or ''} {c.name} {c.description or ''}".lower()
    ]
    context = {
        "rows": rows(found),
        "users": await platform.components.users(session.account.id),
        "q": q,
        "type": _kind(type) or "",
        "where": "mine",
    }
    return render.page(request, "catalog.html", context, session=session)


@router.post("/components/{component_id}/delete")
async def delete(request: Request, component_id: str) -> Response:
    """Delete a saved component nothing runs (the page offers it only for those)."""
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).components.delete(session.account.id, component_id)
    return render.redirect("/components")


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
