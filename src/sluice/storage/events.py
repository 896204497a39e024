"""Emitted events and logs of a source (or workflow): append, page, trim.

Event ids are ``<ts_ms>-<seq>``, strictly increasing per emitter: an emit in the same
millisecond as the previous one (or an earlier one, after a clock step back) continues from it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.domain import states, text
from sluice.domain.events import Event, LogLine
from sluice.domain.paging import Page
from sluice.storage import database, sources
from sluice.storage.tables import events as t
from sluice.storage.tables import logs as lt

#: The emitter's newest position, and the insert: built once (a run's hot path).
_LAST = (
    sa.select(t.c.ts_ms, t.c.seq)
    .where(t.c.emitter_id == sa.bindparam("emitter_id"))
    .order_by(t.c.ts_ms.desc(), t.c.seq.desc())
    .limit(1)
)
#: A batch's events on PostgreSQL: one statement of arrays unnested server-side (one bind, one
#: execution), where an executemany bound and executed each row. The values are what the
#: columns' types would bind (``columns.Str``, ``columns.StoredJSON``).
_INSERT_MANY_PG = sa.text(
    "INSERT INTO events (emitter_id, owner_id, id, ts_ms, seq, channel, emit_id, payload, meta)"
    " SELECT e, o, i, ts, s, c, m, CAST(p AS JSONB), CAST(mt AS JSONB) FROM unnest("
    "CAST(:emitter_id AS TEXT[]), CAST(:owner_id AS TEXT[]), CAST(:id AS TEXT[]),"
    " CAST(:ts_ms AS BIGINT[]), CAST(:seq AS INTEGER[]), CAST(:channel AS TEXT[]),"
    " CAST(:emit_id AS TEXT[]), CAST(:payload AS TEXT[]), CAST(:meta AS TEXT[])"
    ") AS r(e, o, i, ts, s, c, m, p, mt)"
)
_STR_COLUMNS = ("emitter_id", "owner_id", "id", "channel", "emit_id")
#: Events a statement inserts on SQLite: 9 parameters a row, under the 999 an older SQLite
#: allows a statement.
_SQLITE_ROWS = 100


def _insert_sqlite(n: int) -> str:
    """One statement inserting ``n`` events on SQLite (placeholders only)."""
    rows = ",".join(["(?,?,?,?,?,?,?,?,?)"] * n)
    return (
        "INSERT INTO events (emitter_id, owner_id, id, ts_ms, seq, channel, emit_id, payload,"  # noqa: S608
        f" meta) VALUES {rows}"
    )


def append_sync(
    conn: Connection,
    *,
    emitter_id: str,
    owner_id: str,
    now_ms: int,
    items: list[tuple[str, Any, dict[str, Any]]],
) -> list[str]:
    """Store ``(channel, payload, meta)`` items in order; return their event ids."""
    stored = append_events_sync(
        conn, emitter_id=emitter_id, owner_id=owner_id, now_ms=now_ms, items=items
    )
    return [event.id for event in stored]


def append_events_sync(
    conn: Connection,
    *,
    emitter_id: str,
    owner_id: str,
    now_ms: int,
    items: list[tuple[str, Any, dict[str, Any]]],
    deferred: list[dict[str, Any]] | None = None,
) -> list[Event]:
    """Store ``(channel, payload, meta)`` items in order; return them as stored. The last
    position is read once per transaction when it holds the emitter's row (a source's run:
    ``sources.lock_sync``), as the runs of one source in a group commit do. With
    ``deferred`` the rows are added to it, for one ``insert_rows_sync`` later in the same
    transaction (the batch path: one statement for a batch's events)."""
    if not items:
        return []
    memo, key = database.memo(conn), ("last_event", emitter_id)
    last = memo.get(key) if sources.locked_here(conn, emitter_id) else None
    if last is None:
        row = conn.execute(_LAST, {"emitter_id": emitter_id}).first()
        last = (row.ts_ms, row.seq) if row is not None else (0, -1)
    ts_ms, seq = now_ms, 0
    if last[0] >= now_ms:
        ts_ms, seq = last[0], last[1] + 1
    rows = []
    out = []
    # Every event's emit id from one random draw (a draw is a system call).
    emit_ids = ids.random_token(27 * len(items))
    for n, (channel, payload, meta) in enumerate(items):
        event = Event(
            ids.event_id(ts_ms, seq),
            emitter_id,
            ts_ms,
            channel,
            emit_ids[27 * n : 27 * (n + 1)],
            payload,
            meta,
        )
        rows.append(
            {
                "emitter_id": emitter_id,
                "owner_id": owner_id,
                "id": event.id,
                "ts_ms": ts_ms,
                "seq": seq,
                "channel": channel,
                "emit_id": event.emit_id,
                "payload": payload,
                "meta": meta,
            }
        )
        out.append(event)
        seq += 1
    if deferred is None:
        insert_rows_sync(conn, rows)
    else:
        deferred.extend(rows)
    memo[key] = (ts_ms, seq - 1)
    return out


def _str(value: Any) -> Any:
    """As ``columns.Str`` binds a value."""
    return text.clean(value) if isinstance(value, str) else value


def insert_rows_sync(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """The rows ``append_events_sync`` made, in one statement (on PostgreSQL one round trip,
    whatever their number; on SQLite one per ``_SQLITE_ROWS``). Their JSON is
    ``text.stored_json``'s (compact, UTF-8) on both: on SQLite the driver's cursor takes the
    values the columns' types would bind (through SQLAlchemy's executemany each row was bound
    one value at a time, the JSON by ``json.dumps``)."""
    if not rows:
        return
    dbapi = database.sqlite_dbapi(conn)
    if dbapi is not None:
        clean, dumps = text.clean, text.stored_json
        cursor = dbapi.cursor()
        try:
            for start in range(0, len(rows), _SQLITE_ROWS):
                chunk = rows[start : start + _SQLITE_ROWS]
                values: list[Any] = []
                for r in chunk:
                    values += (
                        clean(r["emitter_id"]), clean(r["owner_id"]), clean(r["id"]), r["ts_ms"],
                        r["seq"], _str(r["channel"]), clean(r["emit_id"]), dumps(r["payload"]),
                        dumps(r["meta"]),
                    )  # fmt: skip
                cursor.execute(_insert_sqlite(len(chunk)), values)
        finally:
            cursor.close()
        return
    columns = {name: [text.clean(row[name]) for row in rows] for name in _STR_COLUMNS}
    columns["ts_ms"] = [row["ts_ms"] for row in rows]
    columns["seq"] = [row["seq"] for row in rows]
    columns["payload"] = [text.stored_json(row["payload"]) for row in rows]
    columns["meta"] = [text.stored_json(row["meta"]) for row in rows]
    conn.execute(_INSERT_MANY_PG, columns)


async def append(
    conn: AsyncConnection,
    *,
    emitter_id: str,
    owner_id: str,
    now_ms: int,
    items: list[tuple[str, Any, dict[str, Any]]],
) -> list[str]:
    return await conn.run_sync(
        append_sync, emitter_id=emitter_id, owner_id=owner_id, now_ms=now_ms, items=items
    )


def _event(row: Any) -> Event:
    return Event(
        row.id, row.emitter_id, row.ts_ms, row.channel, row.emit_id, row.payload, row.meta or {}
    )


async def page(
    conn: AsyncConnection,
    emitter_id: str,
    *,
    limit: int,
    window: int = 100,
    channel: str | None = None,
    before: tuple[int, int] | None = None,
    after: tuple[int, int] | None = None,
) -> Page[Event]:
    """Newest first, within the newest ``window`` events (the spec serves the last 100).
    Without ``channel``, every channel but ``$errors`` and ``$in`` (a source's errors and its
    scheduled emits are listed only when asked for by name)."""
    scope = [t.c.emitter_id == emitter_id]
    if channel is not None:
        scope.append(t.c.channel == channel)
    else:
        scope.append(t.c.channel.not_in(states.UNLISTED))
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


def trim_sync(conn: Connection, emitter_id: str, keep: int) -> None:
    """Delete all but the newest ``keep`` events of the emitter."""
    cutoff = (
        conn.execute(
            sa.select(t.c.ts_ms, t.c.seq)
            .where(t.c.emitter_id == emitter_id)
            .order_by(t.c.ts_ms.desc(), t.c.seq.desc())
            .offset(keep)
            .limit(1)
        )
    ).first()
    if cutoff is not None:
        conn.execute(
            t.delete().where(
                t.c.emitter_id == emitter_id,
                sa.tuple_(t.c.ts_ms, t.c.seq)
                <= sa.tuple_(sa.literal(cutoff.ts_ms), sa.literal(cutoff.seq)),
            )
        )


async def trim(conn: AsyncConnection, emitter_id: str, keep: int) -> None:
    return await conn.run_sync(trim_sync, emitter_id, keep)


def take_sync(conn: Connection, emitter_id: str, event_id: str, channel: str) -> Event | None:
    """Remove one event of ``channel`` and return it; None when it is not there (deleted)."""
    row = conn.execute(
        sa.select(t).where(t.c.emitter_id == emitter_id, t.c.id == event_id, t.c.channel == channel)
    ).first()
    if row is None:
        return None
    conn.execute(t.delete().where(t.c.pk == row.pk))
    return _event(row)


async def delete_range(
    conn: AsyncConnection,
    emitter_id: str,
    *,
    start: tuple[int, int] | None = None,
    end: tuple[int, int] | None = None,
    channel: str | None = None,
) -> int:
    """Delete the emitter's events from ``start`` to ``end``, both inclusive, either open
    (none: all of them); only the channel's when one is given. The number deleted."""
    conds: list[sa.ColumnElement[bool]] = [t.c.emitter_id == emitter_id]
    where = sa.tuple_(t.c.ts_ms, t.c.seq)
    if start is not None:
        conds.append(where >= sa.tuple_(sa.literal(start[0]), sa.literal(start[1])))
    if end is not None:
        conds.append(where <= sa.tuple_(sa.literal(end[0]), sa.literal(end[1])))
    if channel is not None:
        conds.append(t.c.channel == channel)
    result = await conn.execute(t.delete().where(*conds))
    return int(result.rowcount)


async def any_stored(conn: AsyncConnection, emitter_id: str) -> bool:
    """Whether the emitter has an event stored (on any channel)."""
    query = sa.select(t.c.emitter_id).where(t.c.emitter_id == emitter_id).limit(1)
    return (await conn.execute(query)).first() is not None


async def delete_all(conn: AsyncConnection, emitter_id: str) -> None:
    await conn.execute(t.delete().where(t.c.emitter_id == emitter_id))
    await conn.execute(lt.delete().where(lt.c.emitter_id == emitter_id))


def _log(row: Any) -> LogLine:
    return LogLine(row.pk, row.emitter_id, row.ts_ms, row.level, row.msg, row.invocation_id)


def append_logs_sync(
    conn: Connection,
    *,
    emitter_id: str,
    owner_id: str,
    invocation_id: str,
    entries: list[dict[str, Any]],
) -> list[LogLine]:
    """Store log lines in order; return them with their ids (what live streams send)."""
    if not entries:
        return []
    rows: list[dict[str, Any]] = [
        {
            "emitter_id": emitter_id,
            "owner_id": owner_id,
            "ts_ms": int(e["ts"]),
            "level": str(e["level"]),
            "msg": str(e["msg"]),
            "invocation_id": invocation_id,
        }
        for e in entries
    ]
    # One multi-row INSERT. Its keys ascend in row order (SQLite rowids, a PostgreSQL
    # sequence), so sorting them pairs them with the rows: sort_by_parameter_order would make
    # SQLAlchemy send one statement per row on SQLite.
    result = conn.execute(lt.insert().returning(lt.c.pk), rows)
    return [
        LogLine(pk, emitter_id, r["ts_ms"], r["level"], r["msg"], invocation_id)
        for pk, r in zip(sorted(result.scalars().all()), rows, strict=True)
    ]


def trim_logs_sync(conn: Connection, emitter_id: str, keep: int) -> None:
    """Delete all but the newest ``keep`` log lines of the emitter, in one statement."""
    cutoff = (
        sa.select(lt.c.pk)
        .where(lt.c.emitter_id == emitter_id)
        .order_by(lt.c.pk.desc())
        .offset(keep)
        .limit(1)
        .scalar_subquery()
    )
    conn.execute(lt.delete().where(lt.c.emitter_id == emitter_id, lt.c.pk <= cutoff))


async def recent_logs(conn: AsyncConnection, emitter_id: str, limit: int) -> list[LogLine]:
    rows = await conn.execute(
        sa.select(lt).where(lt.c.emitter_id == emitter_id).order_by(lt.c.pk.desc()).limit(limit)
    )
    return [_log(r) for r in rows]


async def logs_after(
    conn: AsyncConnection, emitter_id: str, after_pk: int, *, window: int = 100
) -> list[LogLine]:
    """The lines after ``after_pk`` among the newest ``window``, oldest first (a resumed
    stream's replay)."""
    rows = await conn.execute(
        sa.select(lt)
        .where(lt.c.emitter_id == emitter_id, lt.c.pk > after_pk)
        .order_by(lt.c.pk.desc())
        .limit(window)
    )
    return sorted((_log(r) for r in rows), key=lambda line: line.pk)
