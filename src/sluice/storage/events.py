"""Emitted events and logs of a source (or workflow): append, page, trim.

Event ids are ``<ts_ms>-<seq>``, strictly increasing per emitter: an emit in the same
millisecond as the previous one (or an earlier one, after a clock step back) continues from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.storage.tables import events as t
from sluice.storage.tables import logs as lt


@dataclass(frozen=True)
class Event:
    id: str
    emitter_id: str
    ts_ms: int
    channel: str
    emit_id: str
    payload: Any
    meta: dict[str, Any]

    def to_summary(self, *, expand: bool) -> dict[str, Any]:
        meta = {"emitter_id": self.emitter_id, "emit_id": self.emit_id, "name": self.channel}
        meta.update({k: v for k, v in self.meta.items() if k in ("id", "summary", "ts")})
        item: dict[str, Any] = {"id": self.id, "indexed_at_ms": self.ts_ms, "metadata": meta}
        if expand:
            item["event"] = self.payload
        return item


async def append(
    conn: AsyncConnection,
    *,
    emitter_id: str,
    owner_id: str,
    now_ms: int,
    items: list[tuple[str, Any, dict[str, Any]]],
) -> list[str]:
    """Store ``(channel, payload, meta)`` items in order; return their event ids."""
    if not items:
        return []
    last = (
        await conn.execute(
            sa.select(t.c.ts_ms, t.c.seq)
            .where(t.c.emitter_id == emitter_id)
            .order_by(t.c.ts_ms.desc(), t.c.seq.desc())
            .limit(1)
        )
    ).first()
    ts_ms, seq = now_ms, 0
    if last is not None and last.ts_ms >= now_ms:
        ts_ms, seq = last.ts_ms, last.seq + 1
    rows = []
    out = []
    for channel, payload, meta in items:
        event_id = ids.event_id(ts_ms, seq)
        rows.append(
            {
                "emitter_id": emitter_id,
                "owner_id": owner_id,
                "id": event_id,
                "ts_ms": ts_ms,
                "seq": seq,
                "channel": channel,
                "emit_id": ids.random_token(27),
                "payload": payload,
                "meta": meta,
            }
        )
        out.append(event_id)
        seq += 1
    await conn.execute(t.insert(), rows)
    return out


def _event(row: Any) -> Event:
    return Event(
        row.id, row.emitter_id, row.ts_ms, row.channel, row.emit_id, row.payload, row.meta or {}
    )


@dataclass(frozen=True)
class Page:
    items: list[Event]
    total_count: int


async def page(
    conn: AsyncConnection,
    emitter_id: str,
    *,
    limit: int,
    window: int = 100,
    channel: str | None = None,
    before: tuple[int, int] | None = None,
    after: tuple[int, int] | None = None,
) -> Page:
    """Newest first, within the newest ``window`` events (the spec serves the last 100)."""
    scope = [t.c.emitter_id == emitter_id]
    if channel is not None:
        scope.append(t.c.channel == channel)
    newest = (
        sa.select(t.c.pk).where(*scope).order_by(t.c.ts_ms.desc(), t.c.seq.desc()).limit(window)
    ).subquery()
    conds: list[sa.ColumnElement[bool]] = [t.c.pk.in_(sa.select(newest.c.pk))]
    position = sa.tuple_(t.c.ts_ms, t.c.seq)
    if before is not None:
        conds.append(position < sa.tuple_(sa.literal(before[0]), sa.literal(before[1])))
    if after is not None:
        conds.append(position > sa.tuple_(sa.literal(after[0]), sa.literal(after[1])))
    total = (await conn.execute(sa.select(sa.func.count()).select_from(newest))).scalar_one()
    order = [t.c.ts_ms.desc(), t.c.seq.desc()]
    if after is not None and before is None:
        # Page forward from ``after``: take the oldest ones after it, then show newest first.
        order = [t.c.ts_ms.asc(), t.c.seq.asc()]
    rows = (await conn.execute(sa.select(t).where(*conds).order_by(*order).limit(limit))).all()
    items = [_event(r) for r in rows]
    items.sort(key=lambda e: ids.parse_event_id(e.id) or (0, 0), reverse=True)
    return Page(items, int(total))


async def trim(conn: AsyncConnection, emitter_id: str, keep: int) -> None:
    """Delete all but the newest ``keep`` events of the emitter."""
    cutoff = (
        await conn.execute(
            sa.select(t.c.ts_ms, t.c.seq)
            .where(t.c.emitter_id == emitter_id)
            .order_by(t.c.ts_ms.desc(), t.c.seq.desc())
            .offset(keep)
            .limit(1)
        )
    ).first()
    if cutoff is not None:
        await conn.execute(
            t.delete().where(
                t.c.emitter_id == emitter_id,
                sa.tuple_(t.c.ts_ms, t.c.seq)
                <= sa.tuple_(sa.literal(cutoff.ts_ms), sa.literal(cutoff.seq)),
            )
        )


async def delete_all(conn: AsyncConnection, emitter_id: str) -> None:
    await conn.execute(t.delete().where(t.c.emitter_id == emitter_id))
    await conn.execute(lt.delete().where(lt.c.emitter_id == emitter_id))


async def append_logs(
    conn: AsyncConnection,
    *,
    emitter_id: str,
    owner_id: str,
    invocation_id: str,
    entries: list[dict[str, Any]],
) -> None:
    if entries:
        await conn.execute(
            lt.insert(),
            [
                {
                    "emitter_id": emitter_id,
                    "owner_id": owner_id,
                    "ts_ms": int(e["ts"]),
                    "level": str(e["level"]),
                    "msg": str(e["msg"]),
                    "invocation_id": invocation_id,
                }
                for e in entries
            ],
        )


async def trim_logs(conn: AsyncConnection, emitter_id: str, keep: int) -> None:
    """Delete all but the newest ``keep`` log lines of the emitter, in one statement."""
    cutoff = (
        sa.select(lt.c.pk)
        .where(lt.c.emitter_id == emitter_id)
        .order_by(lt.c.pk.desc())
        .offset(keep)
        .limit(1)
        .scalar_subquery()
    )
    await conn.execute(lt.delete().where(lt.c.emitter_id == emitter_id, lt.c.pk <= cutoff))


async def recent_logs(conn: AsyncConnection, emitter_id: str, limit: int) -> list[dict[str, Any]]:
    rows = await conn.execute(
        sa.select(lt).where(lt.c.emitter_id == emitter_id).order_by(lt.c.pk.desc()).limit(limit)
    )
    return [
        {"ts": r.ts_ms, "level": r.level, "msg": r.msg, "invocation_id": r.invocation_id}
        for r in rows
    ]
