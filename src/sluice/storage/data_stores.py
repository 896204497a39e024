"""Data stores and their records (``data_stores``, ``data_store_records``).

Every call is one short transaction, scoped to an account: a store is found by its owner and
its id or name, so one account never reaches another's. Writes first drop the store's expired
records (so they are never counted), then check the size under the store's row lock
(``FOR UPDATE`` on PostgreSQL; SQLite has one writer): concurrent writers cannot add up past the
limit. Expired records are never read.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sluice import errors
from sluice.domain import data_stores as rules
from sluice.domain.data_stores import DataStore
from sluice.storage.tables import data_store_records as r
from sluice.storage.tables import data_stores as t


def _live(now_ms: int) -> sa.ColumnElement[bool]:
    return sa.or_(r.c.expires_ms.is_(None), r.c.expires_ms > now_ms)


def _usage(conn: Connection, store_ids: list[str], now_ms: int) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        sa.select(r.c.store_id, sa.func.count(), sa.func.coalesce(sa.func.sum(r.c.size), 0))
        .where(r.c.store_id.in_(store_ids), _live(now_ms))
        .group_by(r.c.store_id)
    )
    return {row[0]: (int(row[1]), int(row[2])) for row in rows}


def list_sync(conn: Connection, owner_id: str, now_ms: int) -> list[DataStore]:
    rows = conn.execute(sa.select(t).where(t.c.owner_id == owner_id).order_by(t.c.name)).all()
    usage = _usage(conn, [row.id for row in rows], now_ms)
    return [
        DataStore(row.id, row.owner_id, row.name, row.created_at, *usage.get(row.id, (0, 0)))
        for row in rows
    ]


def find_sync(conn: Connection, owner_id: str, ref: str, now_ms: int) -> DataStore | None:
    """The account's store whose id, else name, is ``ref``."""
    for column in (t.c.id, t.c.name):
        row = conn.execute(sa.select(t).where(t.c.owner_id == owner_id, column == ref)).first()
        if row is not None:
            count, size = _usage(conn, [row.id], now_ms).get(row.id, (0, 0))
            return DataStore(row.id, row.owner_id, row.name, row.created_at, count, size)
    return None


def require_sync(conn: Connection, owner_id: str, ref: str, now_ms: int) -> DataStore:
    found = find_sync(conn, owner_id, ref, now_ms)
    if found is None:
        raise errors.NotFound(f"no data store {ref!r} in this account")
    return found


def create_sync(conn: Connection, store: DataStore) -> DataStore:
    taken = conn.execute(
        sa.select(t.c.id).where(t.c.owner_id == store.owner_id, t.c.name == store.name)
    ).first()
    if taken is not None:
        raise errors.Conflict(f"a data store named {store.name!r} exists already", field="name")
    conn.execute(
        t.insert().values(
            id=store.id, owner_id=store.owner_id, name=store.name, created_at=store.created_at
        )
    )
    return store


def delete_sync(conn: Connection, store_id: str) -> None:
    conn.execute(r.delete().where(r.c.store_id == store_id))
    conn.execute(t.delete().where(t.c.id == store_id))


# ---- records --------------------------------------------------------------------------------


def get_sync(conn: Connection, store_id: str, key: str, now_ms: int) -> tuple[bool, Any]:
    """(found, value)."""
    row = conn.execute(
        sa.select(r.c.value).where(r.c.store_id == store_id, r.c.key == key, _live(now_ms))
    ).first()
    return (False, None) if row is None else (True, row.value)


def entries_sync(conn: Connection, store_id: str, now_ms: int) -> list[tuple[str, Any]]:
    rows = conn.execute(
        sa.select(r.c.key, r.c.value)
        .where(r.c.store_id == store_id, _live(now_ms))
        .order_by(r.c.key)
    )
    return [(row.key, row.value) for row in rows]


def _lock(conn: Connection, store_id: str, now_ms: int) -> None:
    """Hold the store (its row) for this write; its expired records go first."""
    query = sa.select(t.c.id).where(t.c.id == store_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    conn.execute(query)
    conn.execute(
        r.delete()
        .where(r.c.store_id == store_id, r.c.expires_ms.is_not(None))
        .where(r.c.expires_ms <= now_ms)
    )


def set_sync(
    conn: Connection,
    store_id: str,
    key: str,
    value: Any,
    *,
    expires_ms: int | None,
    now_ms: int,
    max_bytes: int,
) -> None:
    """Write one record, unless the store would pass ``max_bytes`` (``DataStoreFull``)."""
    _lock(conn, store_id, now_ms)
    total = int(
        conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(r.c.size), 0)).where(r.c.store_id == store_id)
        ).scalar_one()
    )
    old = conn.execute(
        sa.select(r.c.size).where(r.c.store_id == store_id, r.c.key == key)
    ).scalar_one_or_none()
    size = rules.record_size(key, value)
    rules.check_size(total, int(old or 0), size, max_bytes)
    values = {"value": value, "size": size, "expires_ms": expires_ms, "updated_ms": now_ms}
    if old is None:
        conn.execute(r.insert().values(store_id=store_id, key=key, **values))
    else:
        conn.execute(r.update().where(r.c.store_id == store_id, r.c.key == key).values(**values))


def set_ttl_sync(
    conn: Connection, store_id: str, key: str, expires_ms: int | None, now_ms: int
) -> bool:
    """False when there is no such (live) record."""
    _lock(conn, store_id, now_ms)
    done = conn.execute(
        r.update()
        .where(r.c.store_id == store_id, r.c.key == key)
        .values(expires_ms=expires_ms, updated_ms=now_ms)
    )
    return bool(done.rowcount)


def delete_key_sync(conn: Connection, store_id: str, key: str, now_ms: int) -> None:
    _lock(conn, store_id, now_ms)
    conn.execute(r.delete().where(r.c.store_id == store_id, r.c.key == key))


def clear_sync(conn: Connection, store_id: str) -> None:
    conn.execute(r.delete().where(r.c.store_id == store_id))
