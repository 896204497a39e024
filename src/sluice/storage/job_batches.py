"""Adding many jobs at once: the endpoints' group commit (``engine/enqueuer.py``) stores every
waiting request as a job in one statement per batch, on the driver's own cursor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from sluice.domain import text
from sluice.domain.states import JobState
from sluice.storage.tables import jobs as t


@dataclass(frozen=True)
class NewJob:
    kind: str
    owner_id: str
    target_id: str
    payload: Any
    #: Stored already claimed by this worker, for ``lease_ms`` (a run that is under way when
    #: its job is stored: ``engine/client_runs.py``); its id is always returned.
    held_by: str | None = None
    lease_ms: int = 0


def _row(job: NewJob, now_ms: int) -> dict[str, Any]:
    row = {
        "kind": job.kind,
        "owner_id": job.owner_id,
        "target_id": job.target_id,
        "payload": job.payload,
        "status": JobState.QUEUED,
        "attempts": 0,
        "run_after_ms": now_ms,
        "created_ms": now_ms,
    }
    if job.held_by is not None:
        row |= {
            "status": JobState.RUNNING,
            "attempts": 1,
            "claim": 1,
            "worker_id": job.held_by,
            "locked_until_ms": now_ms + job.lease_ms,
        }
    return row


#: ``add_batch``'s rows on SQLite's own cursor, the payload serialized here: a third of the
#: CPU of SQLAlchemy's executemany (its per-row parameter processing and JSON bind).
_ADD_SQLITE = (
    "INSERT INTO jobs (kind, owner_id, target_id, payload, status, attempts, run_after_ms, "
    "created_ms) VALUES (?, ?, ?, ?, 'queued', 0, ?, ?)"
)


#: The same on asyncpg's own connection (PostgreSQL): the payload goes as text, cast by the
#: server, so the statement does not depend on the JSON codecs set on the connection.
_ADD_PG = (
    "INSERT INTO jobs (kind, owner_id, target_id, payload, status, attempts, run_after_ms, "
    "created_ms) VALUES ($1, $2, $3, $4::text::jsonb, 'queued', 0, $5, $6)"
)
_ADD_HELD_PG = (
    "INSERT INTO jobs (kind, owner_id, target_id, payload, status, attempts, claim, "
    "run_after_ms, created_ms, worker_id, locked_until_ms) "
    "VALUES ($1, $2, $3, $4::text::jsonb, 'running', 1, 1, $5, $6, $7, $8) RETURNING id"
)


def _dumps(payload: Any) -> str:
    # As the payload column's type would bind it: NUL and lone surrogates are wrapped.
    return text.stored_json(payload)


#: Many plain jobs in one statement: arrays unnested server-side. One parse, one execution and
#: one firing of the statement-level NOTIFY trigger per batch, where an executemany made one of
#: each per row (most of PostgreSQL's CPU per request under load).
_ADD_MANY_PG = (
    "INSERT INTO jobs (kind, owner_id, target_id, payload, status, attempts, run_after_ms, "
    "created_ms) SELECT k, o, g, p::jsonb, 'queued', 0, $5, $5 "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS b(k, o, g, p)"
)


async def add_batch_asyncpg(
    conn: Any, batch: list[tuple[NewJob, bool]], *, now_ms: int
) -> list[int | None]:
    """``add_batch`` on an asyncpg connection, in one transaction: the CPU of SQLAlchemy's
    async executemany (greenlet hand-offs, per-row parameter processing) was most of an
    endpoint request's on PostgreSQL. A batch of plain jobs only (the usual flush of endpoint
    requests) is one statement, its own transaction: one round trip, no BEGIN and COMMIT."""
    dumps = _dumps
    plain = [j for j, want_id in batch if not want_id and j.held_by is None]
    if len(plain) == len(batch):
        await _add_plain(conn, plain, now_ms)
        return [None] * len(batch)

    async def one(j: NewJob) -> int:
        row = (j.kind, j.owner_id, j.target_id, dumps(j.payload), now_ms, now_ms)
        if j.held_by is None:
            return int(await conn.fetchval(_ADD_PG + " RETURNING id", *row))
        return int(await conn.fetchval(_ADD_HELD_PG, *row, j.held_by, now_ms + j.lease_ms))

    async with conn.transaction():
        if plain:
            await _add_plain(conn, plain, now_ms)
        return [await one(j) if want_id or j.held_by is not None else None for j, want_id in batch]


async def _add_plain(conn: Any, plain: list[NewJob], now_ms: int) -> None:
    """Queued jobs whose ids nobody needs, in one statement."""
    dumps = _dumps
    if len(plain) == 1:
        j = plain[0]
        await conn.execute(
            _ADD_PG, j.kind, j.owner_id, j.target_id, dumps(j.payload), now_ms, now_ms
        )
        return
    await conn.execute(
        _ADD_MANY_PG,
        [j.kind for j in plain],
        [j.owner_id for j in plain],
        [j.target_id for j in plain],
        [dumps(j.payload) for j in plain],
        now_ms,
    )


def add_batch(
    conn: Connection, batch: list[tuple[NewJob, bool]], *, now_ms: int
) -> list[int | None]:
    """Insert jobs (a group commit of requests), a sync function for ``database.Writer``: the
    id of each job flagged True, else None. The unflagged go in one executemany without
    RETURNING (its rows come in no guaranteed order, and SQLAlchemy's sorting of them costs a
    statement per row on SQLite); each flagged one costs a statement."""
    plain = [job for job, want_id in batch if not want_id and job.held_by is None]
    dbapi = conn.connection.dbapi_connection
    if plain and conn.dialect.name == "sqlite" and dbapi is not None:
        dumps = _dumps
        cursor = dbapi.cursor()
        try:
            cursor.executemany(
                _ADD_SQLITE,
                [
                    (j.kind, j.owner_id, j.target_id, dumps(j.payload), now_ms, now_ms)
                    for j in plain
                ],
            )
        finally:
            cursor.close()
    elif plain:
        conn.execute(t.insert(), [_row(job, now_ms) for job in plain])
    return [
        int(conn.execute(t.insert().values(_row(job, now_ms)).returning(t.c.id)).scalar_one())
        if want_id or job.held_by is not None
        else None
        for job, want_id in batch
    ]
