"""Deployed components (``dc_``): a saved component with configured props, and its db state."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import errors
from sluice.domain.deployments import Deployment
from sluice.domain.paging import Page
from sluice.storage import database, paging
from sluice.storage.tables import component_state, saved_components
from sluice.storage.tables import deployed_components as t
from sluice.storage.tables import timers as timers_table

_COLUMNS = [c.name for c in t.columns]


def _row(row: Any) -> Deployment:
    values = {c: getattr(row, c) for c in _COLUMNS}
    values["active"] = bool(values["active"])
    return Deployment(**values)


def slugify(name: str) -> str:
    """``"New Requests!"`` → ``"new-requests"``; never empty."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:200] or "source"


async def unique_slug(
    conn: AsyncConnection, owner_id: str, name: str, also_taken: frozenset[str] = frozenset()
) -> str:
    """``name``, else ``name-2``, ``name-3``… unique among the account's deployments (and not
    in ``also_taken``)."""
    base = slugify(name)
    rows = await conn.execute(
        sa.select(t.c.name_slug).where(
            t.c.owner_id == owner_id,
            sa.or_(t.c.name_slug == base, t.c.name_slug.like(f"{base}-%")),
        )
    )
    taken = {r.name_slug for r in rows} | also_taken
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


async def insert(conn: AsyncConnection, d: Deployment) -> None:
    await conn.execute(t.insert().values(**d.__dict__))


#: Tries of a slug that concurrent deploys keep taking, before a 409.
SLUG_ATTEMPTS = 20


async def with_free_slug(
    conn: AsyncConnection,
    d: Deployment,
    name: str,
    write: Callable[[AsyncConnection, Deployment], Awaitable[None]],
) -> Deployment:
    """``write`` (``insert`` or ``update``) the deployment with a slug of ``name`` free among
    the account's deployments. On PostgreSQL a concurrent deploy can take the slug between
    the read and the write: the write runs in a savepoint and, refused by the unique
    constraint, is tried again with the next free slug. (On SQLite the one writer connection
    of a process orders them already.)"""
    retry = conn.dialect.name == "postgresql"
    tried: set[str] = set()
    for _ in range(SLUG_ATTEMPTS):
        # A slug a racing deploy took may not be visible yet (its transaction was still open
        # when this one read): never try one twice, so each try moves on.
        d = replace(d, name_slug=await unique_slug(conn, d.owner_id, name, frozenset(tried)))
        tried.add(d.name_slug)
        if not retry:
            await write(conn, d)
            return d
        try:
            async with conn.begin_nested():
                await write(conn, d)
            return d
        except sa.exc.IntegrityError as exc:
            if "uq_deployed_components_owner_slug" not in str(exc.orig):
                raise
    raise errors.Conflict(
        f"the name {name!r} was taken by concurrent deploys {SLUG_ATTEMPTS} times; try again",
        field="name",
    )


async def update(conn: AsyncConnection, d: Deployment) -> None:
    values = {k: v for k, v in d.__dict__.items() if k not in ("id", "owner_id", "created_at")}
    await conn.execute(t.update().where(t.c.id == d.id).values(**values))


async def get(conn: AsyncConnection, owner_id: str, deployment_id: str) -> Deployment | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.id == deployment_id, t.c.owner_id == owner_id))
    ).first()
    return _row(row) if row else None


# Built once: the run's hot path should not pay for constructing the statement each time.
_WITH_STATE = (
    sa.select(
        t,
        component_state.c.key.label("state_key"),
        component_state.c.value.label("state_value"),
    )
    .outerjoin(component_state, component_state.c.deployment_id == t.c.id)
    .where(t.c.id == sa.bindparam("deployment_id"), t.c.owner_id == sa.bindparam("owner_id"))
)


def get_with_state(
    conn: Connection, owner_id: str, deployment_id: str
) -> tuple[Deployment, dict[str, Any]] | None:
    """The deployment and its ``$.service.db`` store in one query: the run's hot path, a
    sync function for ``database.Reader``."""
    rows = conn.execute(_WITH_STATE, {"deployment_id": deployment_id, "owner_id": owner_id}).all()
    if not rows:
        return None
    state = {r.state_key: r.state_value for r in rows if r.state_key is not None}
    return _row(rows[0]), state


async def get_by_slug(conn: AsyncConnection, owner_id: str, slug: str) -> Deployment | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.name_slug == slug, t.c.owner_id == owner_id))
    ).first()
    return _row(row) if row else None


def mail_target_sync(conn: Connection, deployment_id: str) -> tuple[str, bool, str | None] | None:
    """(owner id, active, component key) of a source by its id alone: what the inbound mail
    listener checks before it accepts a recipient (the address names no account)."""
    row = conn.execute(
        sa.select(t.c.owner_id, t.c.active, saved_components.c.key)
        .join(saved_components, saved_components.c.id == t.c.component_id)
        .where(t.c.id == deployment_id)
    ).first()
    return None if row is None else (row.owner_id, bool(row.active), row.key)


_LOCK = sa.select(t).where(t.c.id == sa.bindparam("deployment_id"))
_LOCK_PG = _LOCK.with_for_update()


def lock_sync(conn: Connection, deployment_id: str) -> Deployment | None:
    """Re-read the row, locked for this transaction (PostgreSQL); SQLite serializes writers.
    The statements are built once (a run's hot path). Read once per transaction (the runs of
    a group commit share one): under the lock only this transaction changes the row, through
    ``set_dedupe_state_sync``, which keeps the copy up to date."""
    memo = database.memo(conn)
    key = ("deployment", deployment_id)
    if key not in memo:
        query = _LOCK_PG if conn.dialect.name == "postgresql" else _LOCK
        row = conn.execute(query, {"deployment_id": deployment_id}).first()
        memo[key] = _row(row) if row else None
    found: Deployment | None = memo[key]
    return found


def locked_here(conn: Connection, deployment_id: str) -> bool:
    """Whether this transaction holds the deployment's row (``lock_sync``): no other one can
    store the source's events or change its state before it commits."""
    return database.memo(conn).get(("deployment", deployment_id)) is not None


async def lock(conn: AsyncConnection, deployment_id: str) -> Deployment | None:
    return await conn.run_sync(lock_sync, deployment_id)


async def set_builder_workflow(
    conn: AsyncConnection, deployment_id: str, workflow_id: str | None
) -> None:
    """Mark the source as deployed by ``workflow_id``'s builder for its trigger."""
    await conn.execute(
        t.update().where(t.c.id == deployment_id).values(builder_workflow_id=workflow_id)
    )


async def delete(conn: AsyncConnection, deployment_id: str) -> None:
    await conn.execute(
        component_state.delete().where(component_state.c.deployment_id == deployment_id)
    )
    # Timers reference sources or workflows, so no foreign key deletes them (migration 0003).
    await conn.execute(timers_table.delete().where(timers_table.c.deployment_id == deployment_id))
    await conn.execute(t.delete().where(t.c.id == deployment_id))


def set_dedupe_state_sync(
    conn: Connection, deployment_id: str, state: dict[str, Any] | None
) -> None:
    conn.execute(t.update().where(t.c.id == deployment_id).values(dedupe_state=state))
    memo, key = database.memo(conn), ("deployment", deployment_id)
    if memo.get(key) is not None:
        memo[key] = replace(memo[key], dedupe_state=state)


def read_state_sync(conn: Connection, deployment_id: str) -> dict[str, Any]:
    rows = conn.execute(
        sa.select(component_state.c.key, component_state.c.value).where(
            component_state.c.deployment_id == deployment_id
        )
    )
    return {r.key: r.value for r in rows}


async def read_state(conn: AsyncConnection, deployment_id: str) -> dict[str, Any]:
    return await conn.run_sync(read_state_sync, deployment_id)


def write_state_sync(
    conn: Connection, deployment_id: str, writes: dict[str, Any], deletes: list[str]
) -> None:
    keys = list(writes) + list(deletes)
    if not keys:
        return
    conn.execute(
        component_state.delete().where(
            component_state.c.deployment_id == deployment_id, component_state.c.key.in_(keys)
        )
    )
    if writes:
        conn.execute(
            component_state.insert(),
            [{"deployment_id": deployment_id, "key": k, "value": v} for k, v in writes.items()],
        )


async def page(
    conn: AsyncConnection,
    owner_id: str,
    *,
    limit: int,
    before: str | None = None,
    after: str | None = None,
) -> Page[Deployment]:
    """The account's deployments, newest first. ``after`` a cursor: the older ones after it in
    that order; ``before``: the newer ones just before it."""
    scope = t.c.owner_id == owner_id
    rows, total = await paging.newest_first(conn, t, scope, limit=limit, before=before, after=after)
    return Page([_row(r) for r in rows], total)
