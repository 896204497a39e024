"""Saved components (``sc_``): the code, its files, its dependencies and its props."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain.components import SavedComponent, User
from sluice.domain.paging import Page
from sluice.storage import paging
from sluice.storage.tables import deployed_components, workflows
from sluice.storage.tables import saved_components as t

_COLUMNS = [c.name for c in t.columns]


def _row(row: Any) -> SavedComponent:
    return SavedComponent(**{c: getattr(row, c) for c in _COLUMNS})


async def insert(conn: AsyncConnection, component: SavedComponent) -> None:
    await conn.execute(t.insert().values(**component.__dict__))


async def get(conn: AsyncConnection, owner_id: str, component_id: str) -> SavedComponent | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.id == component_id, t.c.owner_id == owner_id))
    ).first()
    return _row(row) if row else None


async def find_by_hash(
    conn: AsyncConnection, owner_id: str, code_hash: str
) -> SavedComponent | None:
    """The account's own saved component (not a registry one) with exactly these files."""
    row = (
        await conn.execute(
            sa.select(t)
            .where(t.c.owner_id == owner_id, t.c.code_hash == code_hash, sa.not_(t.c.registry))
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(1)
        )
    ).first()
    return _row(row) if row else None


async def users(conn: AsyncConnection, owner_id: str) -> dict[str, list[User]]:
    """``{component id: [who runs it]}`` over the account's sources and workflows' action
    steps (a workflow's code steps are not saved components)."""
    found: dict[str, list[User]] = {}
    d = deployed_components
    for row in await conn.execute(
        sa.select(d.c.id, d.c.name, d.c.component_id).where(d.c.owner_id == owner_id)
    ):
        found.setdefault(row.component_id, []).append(User("source", row.id, row.name))
    w = workflows
    for row in await conn.execute(
        sa.select(w.c.id, w.c.name, w.c.steps).where(w.c.owner_id == owner_id)
    ):
        used = {s.get("component_id") for s in row.steps or [] if s.get("component_id")}
        for component_id in sorted(used):
            found.setdefault(component_id, []).append(User("workflow", row.id, row.name))
    return found


async def delete(conn: AsyncConnection, owner_id: str, component_id: str) -> bool:
    """Delete the account's own saved component; False when it has none by that id."""
    done = await conn.execute(
        t.delete().where(t.c.id == component_id, t.c.owner_id == owner_id, sa.not_(t.c.registry))
    )
    return bool(done.rowcount)


async def get_by_key(conn: AsyncConnection, owner_id: str, key: str) -> SavedComponent | None:
    """The newest saved component of the account with that key."""
    row = (
        await conn.execute(
            sa.select(t)
            .where(t.c.key == key, t.c.owner_id == owner_id)
            .order_by(t.c.created_at.desc(), t.c.id.desc())
            .limit(1)
        )
    ).first()
    return _row(row) if row else None


async def get_deployable(
    conn: AsyncConnection, owner_id: str, component_id: str
) -> SavedComponent | None:
    """The account's own component, or a public registry one, by id."""
    row = (
        await conn.execute(
            sa.select(t).where(
                t.c.id == component_id, sa.or_(t.c.owner_id == owner_id, t.c.registry)
            )
        )
    ).first()
    return _row(row) if row else None


async def versions(conn: AsyncConnection, owner_id: str, key: str) -> list[SavedComponent]:
    """Every component with ``key`` the account may deploy: its own saves and the registry's
    versions."""
    rows = await conn.execute(
        sa.select(t).where(t.c.key == key, sa.or_(t.c.owner_id == owner_id, t.c.registry))
    )
    return [_row(r) for r in rows]


async def registry_versions(conn: AsyncConnection, key: str) -> list[SavedComponent]:
    rows = await conn.execute(sa.select(t).where(t.c.registry, t.c.key == key))
    return [_row(r) for r in rows]


async def registry_search(
    conn: AsyncConnection, query: str, *, component_type: str | None, limit: int
) -> list[SavedComponent]:
    """Registry components whose key, name or description contains ``query`` (any case),
    every version, by key: at most ``limit`` rows."""
    where: list[sa.ColumnElement[bool]] = [t.c.registry]
    if query:
        escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = f"%{escaped}%"
        columns = (t.c.key, t.c.name, sa.func.coalesce(t.c.description, ""))
        where.append(sa.or_(*(sa.func.lower(c).like(pattern, escape="\\") for c in columns)))
    if component_type is not None:
        where.append(t.c.component_type == component_type)
    rows = await conn.execute(sa.select(t).where(*where).order_by(t.c.key, t.c.id).limit(limit))
    return [_row(r) for r in rows]


async def get_any(conn: AsyncConnection, component_id: str) -> SavedComponent | None:
    """By id regardless of owner: only for loading a deployment's own code."""
    row = (await conn.execute(sa.select(t).where(t.c.id == component_id))).first()
    return _row(row) if row else None


async def page(
    conn: AsyncConnection,
    owner_id: str,
    *,
    limit: int,
    before: str | None = None,
    after: str | None = None,
    component_type: str | None = None,
) -> Page[SavedComponent]:
    """The account's saved components, newest first; ``after``/``before`` an id as in
    ``storage.sources.page``."""
    scope = t.c.owner_id == owner_id
    if component_type is not None:
        scope = sa.and_(scope, t.c.component_type == component_type)
    rows, total = await paging.newest_first(conn, t, scope, limit=limit, before=before, after=after)
    return Page([_row(r) for r in rows], total)
