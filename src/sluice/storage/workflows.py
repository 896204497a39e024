"""Workflows (``p_``): a trigger and ordered steps, owned by an account.

The row holds the steps as deployed (``engine/components/workflows.py`` builds them) and the id
of the current deployment (``d_``), which changes with the trigger or the steps. An HTTP-triggered
workflow has an ``endpoint_id``, in the same namespace as the endpoints of sources.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain.workflows import Workflow
from sluice.storage import database, paging
from sluice.storage.tables import accounts
from sluice.storage.tables import timers as timers_table
from sluice.storage.tables import workflows as t


def _row(row: Any) -> Workflow:
    return Workflow(
        row.id,
        row.owner_id,
        row.name,
        bool(row.active),
        dict(row.trigger or {}),
        list(row.steps or []),
        row.deployment_id,
        row.endpoint_id,
        row.created_at,
        row.updated_at,
        bool(row.global_errors),
    )


def _values(w: Workflow) -> dict[str, Any]:
    return {
        "owner_id": w.owner_id,
        "name": w.name,
        "active": w.active,
        "trigger": w.trigger,
        "steps": w.steps,
        "deployment_id": w.deployment_id,
        "endpoint_id": w.endpoint_id,
        "created_at": w.created_at,
        "updated_at": w.updated_at,
        "global_errors": w.global_errors,
    }


async def insert(conn: AsyncConnection, workflow: Workflow) -> None:
    await conn.execute(t.insert().values(id=workflow.id, **_values(workflow)))


async def replace(conn: AsyncConnection, workflow: Workflow) -> None:
    await conn.execute(t.update().where(t.c.id == workflow.id).values(**_values(workflow)))


_GET = sa.select(t).where(t.c.owner_id == sa.bindparam("owner_id"), t.c.id == sa.bindparam("id"))


def get_sync(conn: Connection, owner_id: str, workflow_id: str) -> Workflow | None:
    row = conn.execute(_GET, {"owner_id": owner_id, "id": workflow_id}).first()
    return _row(row) if row else None


#: What may change in a workflow while its deployment stays (its steps and trigger make a new
#: deployment id): read on every run, the whole row only when it differs.
_STAMP = sa.select(
    t.c.deployment_id, t.c.active, t.c.global_errors, t.c.name, t.c.endpoint_id, t.c.updated_at
).where(t.c.owner_id == sa.bindparam("owner_id"), t.c.id == sa.bindparam("id"))

Stamp = tuple[Any, ...]


_STAMP_SQLITE = str(_STAMP.compile(dialect=sqlite.dialect()))
_EXISTS = sa.select(t.c.id).where(
    t.c.owner_id == sa.bindparam("owner_id"), t.c.id == sa.bindparam("id")
)
_EXISTS_SQLITE = str(_EXISTS.compile(dialect=sqlite.dialect()))


def _first(conn: Connection, stmt: Any, sqlite_sql: str, owner_id: str, workflow_id: str) -> Any:
    dbapi = database.sqlite_dbapi(conn)
    if dbapi is None:
        return conn.execute(stmt, {"owner_id": owner_id, "id": workflow_id}).first()
    cursor = dbapi.cursor()
    try:
        cursor.execute(sqlite_sql, (owner_id, workflow_id))
        return cursor.fetchone()
    finally:
        cursor.close()


def stamp_sync(conn: Connection, owner_id: str, workflow_id: str) -> Stamp | None:
    row = _first(conn, _STAMP, _STAMP_SQLITE, owner_id, workflow_id)
    return (row[0], bool(row[1]), bool(row[2]), *row[3:]) if row else None


def exists_sync(conn: Connection, owner_id: str, workflow_id: str) -> bool:
    """Whether the workflow is still there (a run's commit asks), once a transaction: a group
    commit's runs of one workflow read it once (``database.memo``; workflows are deleted in
    transactions of their own)."""
    memo, key = database.memo(conn), ("workflow_exists", owner_id, workflow_id)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _first(conn, _EXISTS, _EXISTS_SQLITE, owner_id, workflow_id) is not None
    return bool(found)


def stamp_of(w: Workflow) -> Stamp:
    return (w.deployment_id, w.active, w.global_errors, w.name, w.endpoint_id, w.updated_at)


async def get(conn: AsyncConnection, owner_id: str, workflow_id: str) -> Workflow | None:
    row = (await conn.execute(_GET, {"owner_id": owner_id, "id": workflow_id})).first()
    return _row(row) if row else None


async def page(
    conn: AsyncConnection,
    owner_id: str,
    *,
    limit: int,
    before: str | None = None,
    after: str | None = None,
) -> tuple[list[Workflow], int]:
    rows, total = await paging.newest_first(
        conn, t, t.c.owner_id == owner_id, limit=limit, before=before, after=after
    )
    return [_row(r) for r in rows], total


async def delete(conn: AsyncConnection, workflow_id: str) -> None:
    await conn.execute(timers_table.delete().where(timers_table.c.deployment_id == workflow_id))
    await conn.execute(t.delete().where(t.c.id == workflow_id))


_ERROR_WORKFLOW = sa.select(accounts.c.error_workflow_id).where(
    accounts.c.id == sa.bindparam("owner_id")
)


def error_workflow_id_sync(conn: Connection, owner_id: str) -> str | None:
    value = conn.execute(_ERROR_WORKFLOW, {"owner_id": owner_id}).scalar_one_or_none()
    return str(value) if value else None


async def error_workflow_id(conn: AsyncConnection, owner_id: str) -> str | None:
    value = (await conn.execute(_ERROR_WORKFLOW, {"owner_id": owner_id})).scalar_one_or_none()
    return str(value) if value else None


async def set_error_workflow_id(
    conn: AsyncConnection, owner_id: str, workflow_id: str | None
) -> None:
    await conn.execute(
        accounts.update().where(accounts.c.id == owner_id).values(error_workflow_id=workflow_id)
    )
