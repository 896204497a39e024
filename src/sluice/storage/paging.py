"""Keyset pagination of resource lists: newest first by (created_at, id).

``after`` a resource id gives the older ones after it in that order; ``before`` one gives the
newer ones just before it. Cursors stay valid while rows are added, unlike offsets. A list
read so comes back as a ``Page`` of its items (events, deployments, components).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection


async def newest_first(
    conn: AsyncConnection,
    table: sa.Table,
    scope: sa.ColumnElement[bool],
    *,
    limit: int,
    before: str | None = None,
    after: str | None = None,
) -> tuple[Sequence[Any], int]:
    """(rows newest first, total count in ``scope``); an unknown cursor gives no rows."""
    created, ident = table.c.created_at, table.c.id
    total = int((await conn.execute(sa.select(sa.func.count()).where(scope))).scalar_one())
    query = sa.select(table).where(scope)
    ascending = False
    for cursor, older in ((after, True), (before, False)):
        if cursor is None:
            continue
        anchor = (
            await conn.execute(sa.select(created, ident).where(scope, ident == cursor))
        ).first()
        if anchor is None:
            return [], total
        mark = sa.tuple_(sa.literal(anchor.created_at), sa.literal(anchor.id))
        position = sa.tuple_(created, ident)
        query = query.where(position < mark if older else position > mark)
        # "before" alone: take the nearest newer rows, then show them newest first.
        ascending = not older and after is None
    order = (created.asc(), ident.asc()) if ascending else (created.desc(), ident.desc())
    rows = (await conn.execute(query.order_by(*order).limit(limit))).all()
    return sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True), total
