"""Subscriptions (``sub_``): an emitter, a listener and a channel, within one account."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.domain.routing import AutoSubscription, Link, Subscription
from sluice.storage import database
from sluice.storage.tables import auto_subscriptions as at
from sluice.storage.tables import subscriptions as t


def _row(row: Any) -> Subscription:
    return Subscription(
        row.id, row.owner_id, row.emitter_id, row.listener_id, row.event_name, row.created_at
    )


def _same_link(owner_id: str, link: Link) -> list[sa.ColumnElement[bool]]:
    return [
        t.c.owner_id == owner_id,
        t.c.emitter_id == link.emitter_id,
        t.c.listener_id == link.listener_id,
        t.c.event_name == link.event_name,
    ]


async def find(conn: AsyncConnection, owner_id: str, link: Link) -> Subscription | None:
    row = (await conn.execute(sa.select(t).where(*_same_link(owner_id, link)))).first()
    return _row(row) if row else None


async def create(conn: AsyncConnection, owner_id: str, link: Link, *, now_s: int) -> Subscription:
    """The subscription for ``link``, created unless it exists (two racing creates end with
    one row: the loser's insert does nothing and it reads the winner's)."""
    found = await find(conn, owner_id, link)
    if found is not None:
        return found
    values = {
        "id": ids.new_id("sub"),
        "owner_id": owner_id,
        "emitter_id": link.emitter_id,
        "listener_id": link.listener_id,
        "event_name": link.event_name,
        "created_at": now_s,
    }
    insert: Any = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(t)
    await conn.execute(insert.values(**values).on_conflict_do_nothing())
    created = await find(conn, owner_id, link)
    assert created is not None
    return created


async def delete(conn: AsyncConnection, owner_id: str, link: Link) -> bool:
    result = await conn.execute(t.delete().where(*_same_link(owner_id, link)))
    return bool(result.rowcount)


async def list_for(conn: AsyncConnection, owner_id: str) -> list[Subscription]:
    rows = await conn.execute(
        sa.select(t).where(t.c.owner_id == owner_id).order_by(t.c.created_at, t.c.id)
    )
    return [_row(r) for r in rows]


# Built once: every stored emit asks it (the run's hot path).
_FROM_EMITTER = (
    sa.select(t.c.emitter_id, t.c.listener_id, t.c.event_name)
    .where(
        t.c.owner_id == sa.bindparam("owner_id"),
        t.c.emitter_id.in_([sa.bindparam("exact"), sa.bindparam("glob")]),
    )
    .order_by(t.c.created_at, t.c.id)
)


def from_emitter(conn: Connection, owner_id: str, patterns: tuple[str, ...]) -> list[Link]:
    """Every link whose emitter is one of ``patterns`` (an id and its glob), any channel,
    oldest first, as a run's commit delivers its events. Read once per transaction (the runs
    of a group commit share one): subscriptions are written in transactions of their own."""
    memo, key = database.memo(conn), ("links", owner_id, patterns)
    if key not in memo:
        exact, glob = (patterns + patterns)[:2]
        rows = conn.execute(_FROM_EMITTER, {"owner_id": owner_id, "exact": exact, "glob": glob})
        memo[key] = [Link(r.emitter_id, r.listener_id, r.event_name) for r in rows]
    return list(memo[key])


async def delete_for_source(conn: AsyncConnection, deployment_id: str) -> None:
    """Every subscription where the source is the emitter or the listener."""
    await conn.execute(
        t.delete().where(sa.or_(t.c.emitter_id == deployment_id, t.c.listener_id == deployment_id))
    )


# ---- auto-subscriptions: every workflow created later is subscribed to the listener ----------


async def create_auto(
    conn: AsyncConnection, owner_id: str, listener_id: str, event_name: str, *, now_s: int
) -> AutoSubscription:
    query = sa.select(at).where(
        at.c.owner_id == owner_id, at.c.listener_id == listener_id, at.c.event_name == event_name
    )
    row = (await conn.execute(query)).first()
    if row is None:
        insert: Any = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(at)
        await conn.execute(
            insert.values(
                id=ids.new_id("sub"),
                owner_id=owner_id,
                listener_id=listener_id,
                event_name=event_name,
                created_at=now_s,
            ).on_conflict_do_nothing()
        )
        row = (await conn.execute(query)).first()
    assert row is not None
    return AutoSubscription(row.id, row.listener_id, row.event_name, row.created_at)


async def auto_for(conn: AsyncConnection, owner_id: str) -> list[tuple[str, str]]:
    rows = await conn.execute(
        sa.select(at.c.listener_id, at.c.event_name)
        .where(at.c.owner_id == owner_id)
        .order_by(at.c.created_at, at.c.id)
    )
    return [(r.listener_id, r.event_name) for r in rows]


async def list_auto(conn: AsyncConnection, owner_id: str) -> list[AutoSubscription]:
    rows = await conn.execute(
        sa.select(at).where(at.c.owner_id == owner_id).order_by(at.c.created_at, at.c.id)
    )
    return [AutoSubscription(r.id, r.listener_id, r.event_name, r.created_at) for r in rows]


async def delete_auto(
    conn: AsyncConnection, owner_id: str, listener_id: str, event_name: str
) -> bool:
    result = await conn.execute(
        at.delete().where(
            at.c.owner_id == owner_id,
            at.c.listener_id == listener_id,
            at.c.event_name == event_name,
        )
    )
    return bool(result.rowcount)
