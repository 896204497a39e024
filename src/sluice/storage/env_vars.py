"""An account's environment variables: rows of ``env_vars`` (values as stored: encrypted by
the engine, ``engine/components/env_vars.py``)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.storage.tables import env_vars as t


async def put(conn: AsyncConnection, owner_id: str, name: str, value: str, now_s: int) -> None:
    """Set ``name`` (replacing its value when it exists)."""
    where = (t.c.owner_id == owner_id) & (t.c.name == name)
    changed = await conn.execute(t.update().where(where).values(value=value, updated_at=now_s))
    if not changed.rowcount:
        await conn.execute(
            t.insert().values(owner_id=owner_id, name=name, value=value, updated_at=now_s)
        )


async def delete(conn: AsyncConnection, owner_id: str, name: str) -> bool:
    """Whether there was one to delete."""
    gone = await conn.execute(t.delete().where((t.c.owner_id == owner_id) & (t.c.name == name)))
    return bool(gone.rowcount)


async def names(conn: AsyncConnection, owner_id: str) -> list[tuple[str, int]]:
    """``(name, updated_at)`` of each, by name."""
    rows = await conn.execute(
        sa.select(t.c.name, t.c.updated_at).where(t.c.owner_id == owner_id).order_by(t.c.name)
    )
    return [(row.name, row.updated_at) for row in rows]


async def values(conn: AsyncConnection, owner_id: str) -> dict[str, str]:
    """Every name's stored (encrypted) value."""
    rows = await conn.execute(sa.select(t.c.name, t.c.value).where(t.c.owner_id == owner_id))
    return {row.name: row.value for row in rows}


async def count(conn: AsyncConnection, owner_id: str) -> int:
    query = sa.select(sa.func.count()).select_from(t).where(t.c.owner_id == owner_id)
    return int((await conn.execute(query)).scalar_one())
