"""Webhooks (``wh_…``): rows of ``webhooks``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain.deliveries import Webhook
from sluice.storage.tables import webhooks as t


def _of(row: Any) -> Webhook:
    return Webhook(
        row.id,
        row.owner_id,
        row.url,
        row.name,
        row.description,
        bool(row.active),
        row.created_at,
        row.updated_at,
    )


async def insert(conn: AsyncConnection, hook: Webhook) -> None:
    await conn.execute(t.insert().values(**hook.__dict__))


async def get(conn: AsyncConnection, owner_id: str, webhook_id: str) -> Webhook | None:
    query = sa.select(t).where(t.c.owner_id == owner_id, t.c.id == webhook_id)
    row = (await conn.execute(query)).first()
    return _of(row) if row else None


async def list_for(conn: AsyncConnection, owner_id: str) -> list[Webhook]:
    rows = await conn.execute(sa.select(t).where(t.c.owner_id == owner_id).order_by(t.c.id))
    return [_of(row) for row in rows]


async def delete(conn: AsyncConnection, owner_id: str, webhook_id: str) -> bool:
    gone = await conn.execute(t.delete().where(t.c.owner_id == owner_id, t.c.id == webhook_id))
    return bool(gone.rowcount)


async def count(conn: AsyncConnection, owner_id: str) -> int:
    query = sa.select(sa.func.count()).select_from(t).where(t.c.owner_id == owner_id)
    return int((await conn.execute(query)).scalar_one())


def by_ids_sync(conn: Connection, webhook_ids: Iterable[str]) -> dict[str, Webhook]:
    """The webhooks of those ids that exist, by id (any account's: the delivery worker's)."""
    wanted = sorted(set(webhook_ids))
    if not wanted:
        return {}
    rows = conn.execute(sa.select(t).where(t.c.id.in_(wanted)))
    return {row.id: _of(row) for row in rows}
