"""What each account keeps stored, counted as it is written (issue 25, quotas).

``account_usage.stored_bytes`` grows in the transaction of every write it counts (events, log
lines, runs, ``$.service.db`` stores, data store records, stored files): one ``UPDATE`` of one
row, never a ``SUM`` per request. Trims and deletes do not count down; a *recount*
(``recount_sync``: the exact sum, by the characters of each stored value's JSON) replaces the
figure when the counter says the account is over its quota, at most once per
``engine/state/quotas.RECOUNT_MS``, so what
retention freed is found before anything is refused.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from sluice.storage import database, files
from sluice.storage.tables import (
    account_usage,
    component_state,
    data_store_records,
    data_stores,
    deployed_components,
    events,
    logs,
    runs,
    step_state,
    workflows,
)

#: One statement, the same text on SQLite (3.35+) and PostgreSQL, built once: a run's
#: transaction pays one execution of it, not a compilation.
_ADD = sa.text(
    "INSERT INTO account_usage (owner_id, stored_bytes, counted_ms) "
    "VALUES (:owner_id, :n, :now_ms) "
    "ON CONFLICT (owner_id) DO UPDATE "
    "SET stored_bytes = account_usage.stored_bytes + excluded.stored_bytes "
    "RETURNING stored_bytes"
)


def add_sync(conn: Connection, owner_id: str, n: int, now_ms: int) -> int:
    """Count ``n`` more bytes for the account; its figure after. On SQLite on the driver's
    cursor (``database.sqlite_dbapi``): through SQLAlchemy this one statement was ~10% of the
    server's own CPU for a workflow request (its result's set-up more than the SQL), as every
    run and every batch of source runs is charged."""
    values = {"owner_id": owner_id, "n": max(n, 0), "now_ms": now_ms}
    dbapi = database.sqlite_dbapi(conn)
    if dbapi is None:
        return int(conn.execute(_ADD, values).scalar_one())
    cursor = dbapi.cursor()
    try:
        cursor.execute(_ADD.text, values)
        # Read to its end: the statement is done (and reset) before the transaction commits.
        ((stored,),) = cursor.fetchall()
    finally:
        cursor.close()
    return int(stored)


def read_sync(conn: Connection, owner_id: str) -> tuple[int, int]:
    """``(stored_bytes, counted_ms)``; ``(0, 0)`` for an account that stored nothing yet."""
    row = conn.execute(
        sa.select(account_usage.c.stored_bytes, account_usage.c.counted_ms).where(
            account_usage.c.owner_id == owner_id
        )
    ).first()
    return (int(row.stored_bytes), int(row.counted_ms)) if row is not None else (0, 0)


def _size(column: Any) -> Any:
    return sa.func.coalesce(sa.func.sum(sa.func.length(sa.cast(column, sa.Text))), 0)


def recount_sync(conn: Connection, owner_id: str, now_ms: int) -> int:
    """Count the account's stored bytes exactly and keep the figure; the figure."""
    parts = [
        sa.select(_size(events.c.payload) + _size(events.c.meta)).where(
            events.c.owner_id == owner_id
        ),
        sa.select(_size(logs.c.msg)).where(logs.c.owner_id == owner_id),
        sa.select(
            _size(runs.c.event) + _size(runs.c.context) + _size(runs.c.steps) + _size(runs.c.error)
        ).where(runs.c.owner_id == owner_id),
        sa.select(_size(component_state.c.value))
        .select_from(component_state.join(deployed_components))
        .where(deployed_components.c.owner_id == owner_id),
        sa.select(_size(step_state.c.value))
        .select_from(step_state.join(workflows, workflows.c.id == step_state.c.workflow_id))
        .where(workflows.c.owner_id == owner_id),
        sa.select(sa.func.coalesce(sa.func.sum(data_store_records.c.size), 0))
        .select_from(data_store_records.join(data_stores))
        .where(data_stores.c.owner_id == owner_id),
        files.live_bytes_query(owner_id, now_ms),
    ]
    total = sum(int(conn.execute(part).scalar_one() or 0) for part in parts)
    dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(
        dialect.insert(account_usage)
        .values(owner_id=owner_id, stored_bytes=total, counted_ms=now_ms)
        .on_conflict_do_update(
            index_elements=[account_usage.c.owner_id],
            set_={"stored_bytes": total, "counted_ms": now_ms},
        )
    )
    return total
