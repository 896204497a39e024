"""Durable jobs: the queue behind every acknowledged request, timer tick and delivery.

A job is ``queued`` until a worker claims it (``running`` with a lease), then ``done`` (in the
same transaction as the results it produced, so a completed job never runs again) or
``failed`` after its last attempt. A worker that dies leaves its lease to expire; the job is
claimed again (at-least-once). PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` so several
processes share one queue; SQLite has one writer and needs no more.

**Fencing.** Every claim adds one to the job's ``claim`` column and hands that number to the
claimer (``Job.claim``). What a holder writes about its job (done, retry, release, renew)
applies only where ``claim`` is still its number: a worker that stalled past its lease (a
SIGSTOP, a VM pause, a long GC) and woke after another worker took the job over finds its
writes refused, and its results roll back with its done mark (``errors.LeaseLost``), so a run
is stored once however long a worker stalls.

**Adding many at once.** The endpoints' group commit (``engine/queue/enqueuer.py``) stores every
waiting request as a job in one statement per batch, on the driver's own cursor
(``add_batch``, ``add_batch_asyncpg``; a ``NewJob`` each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain import text
from sluice.domain.states import JobKind, JobState
from sluice.storage import database
from sluice.storage.tables import jobs as t


@dataclass(frozen=True)
class Job:
    id: int
    kind: JobKind
    owner_id: str
    target_id: str
    payload: Any
    attempts: int
    created_ms: int
    #: The fencing token of this claim (see the module docstring).
    claim: int = 0


def _job(row: Any) -> Job:
    return Job(
        row.id,
        JobKind(row.kind),
        row.owner_id,
        row.target_id,
        row.payload,
        row.attempts,
        row.created_ms,
        row.claim,
    )


def _held(held: list[Job]) -> sa.ColumnElement[bool]:
    """The rows of these claims, while each is still the current one."""
    return sa.and_(
        sa.tuple_(t.c.id, t.c.claim).in_([(job.id, job.claim) for job in held]),
        t.c.status == JobState.RUNNING,
    )


def enqueue_sync(
    conn: Connection,
    *,
    kind: JobKind,
    owner_id: str,
    target_id: str,
    payload: Any,
    now_ms: int,
    run_after_ms: int | None = None,
) -> int:
    result = conn.execute(
        t.insert()
        .values(
            kind=kind,
            owner_id=owner_id,
            target_id=target_id,
            payload=payload,
            status=JobState.QUEUED,
            attempts=0,
            run_after_ms=run_after_ms or now_ms,
            created_ms=now_ms,
        )
        .returning(t.c.id)
    )
    return int(result.scalar_one())


async def enqueue(
    conn: AsyncConnection,
    *,
    kind: JobKind,
    owner_id: str,
    target_id: str,
    payload: Any,
    now_ms: int,
    run_after_ms: int | None = None,
) -> int:
    return await conn.run_sync(
        enqueue_sync,
        kind=kind,
        owner_id=owner_id,
        target_id=target_id,
        payload=payload,
        now_ms=now_ms,
        run_after_ms=run_after_ms,
    )


def _ready(now_ms: int) -> sa.ColumnElement[bool]:
    return sa.or_(
        sa.and_(t.c.status == JobState.QUEUED, t.c.run_after_ms <= now_ms),
        # A lease that passed: the worker died or hung; run the job again.
        sa.and_(t.c.status == JobState.RUNNING, t.c.locked_until_ms < now_ms),
    )


def claim_sync(
    conn: Connection,
    *,
    worker_id: str,
    now_ms: int,
    lease_ms: int,
    limit: int,
    kinds: tuple[JobKind, ...] | None = None,
    expired: bool = True,
    skip_owners: tuple[str, ...] = (),
) -> list[Job]:
    """Take up to ``limit`` ready jobs, oldest first, leased to ``worker_id``: first those whose
    lease passed (their worker died or hung; unless ``expired`` is False), then queued ones.
    Each pick walks the ``(status, id)`` index from the oldest job of that status and stops at
    ``limit``: the cost does not grow with the done jobs kept, nor with the queue behind (but
    it walks past the jobs of ``skip_owners``, the accounts at their share, which stay queued).
    """
    claimed: list[Job] = []
    until = now_ms + lease_ms
    if conn.dialect.name == "postgresql":
        # Never "read every job of the status, then sort": with statistics older than a burst
        # (autovacuum analyzes a minute late), PostgreSQL thought the queue held 2 jobs and
        # sorted all 64,000 for each claim (32 ms). Without a sort, the index walk in id order.
        conn.exec_driver_sql("SET LOCAL enable_sort = off")
    if expired:
        claimed = _take(conn, True, now_ms, limit, kinds, worker_id, until, skip_owners)
    if len(claimed) < limit:
        claimed += _take(
            conn, False, now_ms, limit - len(claimed), kinds, worker_id, until, skip_owners
        )
    return sorted(claimed, key=lambda j: j.id)


#: Claim statements, built once per (expired?, kinds?, skipped owners?, dialect): building one
#: per call was most of a claim's CPU (SQLAlchemy's expression and cache-key work).
_TAKE: dict[tuple[bool, bool, bool, bool], sa.Update] = {}


def _take_statement(expired: bool, kinds: bool, skip: bool, postgres: bool) -> sa.Update:
    key = (expired, kinds, skip, postgres)
    statement = _TAKE.get(key)
    if statement is None:
        ready = (
            (t.c.status == JobState.RUNNING, t.c.locked_until_ms < sa.bindparam("b_now"))
            if expired
            else (t.c.status == JobState.QUEUED, t.c.run_after_ms <= sa.bindparam("b_now"))
        )
        pick = sa.select(t.c.id).where(*ready).order_by(t.c.id).limit(sa.bindparam("b_limit"))
        if kinds:
            pick = pick.where(t.c.kind.in_(sa.bindparam("b_kinds", expanding=True)))
        if skip:
            pick = pick.where(t.c.owner_id.not_in(sa.bindparam("b_skip", expanding=True)))
        if postgres:
            pick = pick.with_for_update(skip_locked=True)
        statement = _TAKE[key] = (
            t.update()
            .where(t.c.id.in_(pick.scalar_subquery()))
            .values(
                status=JobState.RUNNING,
                locked_until_ms=sa.bindparam("b_until"),
                worker_id=sa.bindparam("b_worker"),
                attempts=t.c.attempts + 1,
                claim=t.c.claim + 1,
            )
            .returning(*t.c)
        )
    return statement


def _take(
    conn: Connection,
    expired: bool,
    now_ms: int,
    limit: int,
    kinds: tuple[JobKind, ...] | None,
    worker_id: str,
    locked_until_ms: int,
    skip_owners: tuple[str, ...] = (),
) -> list[Job]:
    postgres = conn.dialect.name == "postgresql"
    dbapi = None if postgres else database.sqlite_dbapi(conn)
    if dbapi is not None:
        return _take_sqlite(
            dbapi, expired, now_ms, limit, kinds, worker_id, locked_until_ms, skip_owners
        )
    statement = _take_statement(expired, bool(kinds), bool(skip_owners), postgres)
    params: dict[str, Any] = {
        "b_now": now_ms,
        "b_limit": limit,
        "b_until": locked_until_ms,
        "b_worker": worker_id,
    }
    if kinds:
        params["b_kinds"] = list(kinds)
    if skip_owners:
        params["b_skip"] = list(skip_owners)
    return [_job(r) for r in conn.execute(statement, params)]


def _take_sqlite(
    dbapi: Any,
    expired: bool,
    now_ms: int,
    limit: int,
    kinds: tuple[JobKind, ...] | None,
    worker_id: str,
    locked_until_ms: int,
    skip_owners: tuple[str, ...],
) -> list[Job]:
    """``_take`` on SQLite on the driver's cursor: ``_take_statement`` written out, its rows read
    with one orjson load each (through SQLAlchemy, a claim's result rows and their JSON were
    ~6% of the server's own samples under a source's load)."""
    params: list[Any] = [JobState.RUNNING.value, locked_until_ms, worker_id]
    if expired:
        where = "status = ? AND locked_until_ms < ?"
        params += (JobState.RUNNING.value, now_ms)
    else:
        where = "status = ? AND run_after_ms <= ?"
        params += (JobState.QUEUED.value, now_ms)
    if kinds:
        where += f" AND kind IN ({','.join('?' * len(kinds))})"
        params += (kind.value for kind in kinds)
    if skip_owners:
        where += f" AND owner_id NOT IN ({','.join('?' * len(skip_owners))})"
        params += skip_owners
    params.append(limit)
    statement = (
        "UPDATE jobs SET status = ?, locked_until_ms = ?, worker_id = ?,"  # noqa: S608
        " attempts = attempts + 1, claim = claim + 1"
        f" WHERE id IN (SELECT id FROM jobs WHERE {where} ORDER BY id LIMIT ?)"
        " RETURNING id, kind, owner_id, target_id, payload, attempts, created_ms, claim"
    )  # placeholders only: every value is a parameter
    cursor = dbapi.cursor()
    try:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    loads = text.loads_stored
    return [
        Job(row[0], JobKind(row[1]), row[2], row[3], loads(row[4]), row[5], row[6], row[7])
        for row in rows
    ]


def release_sync(conn: Connection, held: list[Job]) -> None:
    """Queue again jobs this worker claimed but never started (it is stopping, or their
    account is at its share): as if never claimed, their place in the queue unchanged. A
    claim that is no longer current (taken over) is left alone."""
    conn.execute(
        t.update()
        .where(_held(held))
        .values(
            status=JobState.QUEUED, locked_until_ms=None, worker_id=None, attempts=t.c.attempts - 1
        )
    )


def renew_sync(conn: Connection, held: list[Job], *, until_ms: int) -> set[int]:
    """Extend the leases of jobs this worker holds (running, or claimed and waiting for a
    slot) to ``until_ms``; the ids renewed. A job whose lease passed and was claimed by
    another worker is not touched.

    On PostgreSQL the rows are locked in id order and a row locked by another transaction is
    skipped (renewed at the next beat): a renewal never waits, so it cannot deadlock with this
    worker's own group commit marking some of the same jobs done in another order."""
    rows = (
        sa.select(t.c.id).where(_held(held)).order_by(t.c.id).with_for_update(skip_locked=True)
        if conn.dialect.name == "postgresql"
        else sa.select(t.c.id).where(_held(held))
    )
    result = conn.execute(
        t.update()
        .where(t.c.id.in_(rows.scalar_subquery()))
        .values(locked_until_ms=until_ms)
        .returning(t.c.id)
    )
    return {int(row[0]) for row in result}


#: Rows deleted per pruning transaction: short write locks on SQLite.
PRUNE_BATCH = 2000


async def prune_done(writer: database.Writer, *, finished_before_ms: int) -> int:
    """Delete the done jobs finished before the time, ``PRUNE_BATCH`` per transaction; the
    number deleted."""
    total = 0
    while True:
        deleted = await writer(
            lambda conn: prune_sync(conn, finished_before_ms=finished_before_ms, limit=PRUNE_BATCH)
        )
        total += deleted
        if deleted < PRUNE_BATCH:
            return total


def prune_sync(conn: Connection, *, finished_before_ms: int, limit: int) -> int:
    """Delete up to ``limit`` done jobs finished before ``finished_before_ms`` (their results
    are stored elsewhere: events, runs); the number deleted. Failed jobs are kept."""
    old = (
        sa.select(t.c.id)
        .where(t.c.status == JobState.DONE, t.c.finished_ms < finished_before_ms)
        .order_by(t.c.id)
        .limit(limit)
    )
    return int(conn.execute(t.delete().where(t.c.id.in_(old.scalar_subquery()))).rowcount)


def next_due_sync(conn: Connection, *, now_ms: int, kinds: tuple[JobKind, ...]) -> int | None:
    """The earliest ``run_after_ms`` after ``now_ms`` of the queued jobs of ``kinds``: when the
    next of them becomes ready (a ``$.flow`` pause, a retry's backoff): jobs made due later
    than their creation, one probe of their partial index however long the queue."""
    query = sa.select(sa.func.min(t.c.run_after_ms)).where(
        # The deferred jobs' partial index (migration 0010), whose conditions the planner must
        # see written out (a bound status could be any): the jobs due when made are not in it.
        t.c.status == sa.literal_column(f"'{JobState.QUEUED}'"),
        t.c.run_after_ms > t.c.created_ms,
        t.c.run_after_ms > now_ms,
        t.c.kind.in_(kinds),
    )
    value = conn.execute(query).scalar()
    return None if value is None else int(value)


async def claim(
    conn: AsyncConnection,
    *,
    worker_id: str,
    now_ms: int,
    lease_ms: int,
    limit: int,
    kinds: tuple[JobKind, ...] | None = None,
) -> list[Job]:
    return await conn.run_sync(
        claim_sync, worker_id=worker_id, now_ms=now_ms, lease_ms=lease_ms, limit=limit, kinds=kinds
    )


def claim_one_sync(
    conn: Connection, job_id: int, *, worker_id: str, now_ms: int, lease_ms: int
) -> Job | None:
    """Take one given job if it is still ready (the path that runs a request right away)."""
    row = conn.execute(
        t.update()
        .where(t.c.id == job_id, _ready(now_ms))
        .values(
            status=JobState.RUNNING,
            locked_until_ms=now_ms + lease_ms,
            worker_id=worker_id,
            attempts=t.c.attempts + 1,
            claim=t.c.claim + 1,
        )
        .returning(*t.c)
    ).first()
    return _job(row) if row else None


_COMPLETE = (
    t.update()
    .where(
        t.c.id == sa.bindparam("b_id"),
        t.c.claim == sa.bindparam("b_claim"),
        t.c.status == JobState.RUNNING,
    )
    .values(status=JobState.DONE, finished_ms=sa.bindparam("b_now"), locked_until_ms=None)
)


def complete_sync(conn: Connection, job: Job, *, now_ms: int) -> bool:
    """Mark done, only while this claim is the job's current one (else another worker took it
    over: the caller's transaction must not commit, ``errors.LeaseLost``)."""
    result = conn.execute(_COMPLETE, {"b_id": job.id, "b_claim": job.claim, "b_now": now_ms})
    return bool(result.rowcount)


#: The batch path's done marks on PostgreSQL: one statement, parsed and compiled once,
#: whatever the batch's size (the claims as arrays). Built from the batch's ``(id, claim)``
#: pairs as an ``IN`` list instead, SQLAlchemy compiled a new statement for each batch: 7% of
#: the server's CPU in a profile of the drain (bench/README.md). ``id = ANY`` keeps the plan on
#: the primary key; each row's claim is the one at its id's place in the arrays.
_COMPLETE_MANY_PG = sa.text(
    "UPDATE jobs SET status = :done, finished_ms = :now, locked_until_ms = NULL"
    " WHERE id = ANY(CAST(:ids AS BIGINT[])) AND status = :running"
    " AND claim = (CAST(:claims AS INTEGER[]))[array_position(CAST(:ids AS BIGINT[]), id)]"
    " RETURNING id"
)


def complete_many_sync(conn: Connection, held: list[Job], *, now_ms: int) -> set[int]:
    """Mark done, in one statement, those of ``held`` whose claim is still current (the batch
    path); their ids. The others were taken over: their results must not commit."""
    if not held:
        return set()
    if conn.dialect.name == "postgresql":
        params = {
            "done": JobState.DONE.value,
            "running": JobState.RUNNING.value,
            "now": now_ms,
            "ids": [job.id for job in held],
            "claims": [job.claim for job in held],
        }
        return {int(row[0]) for row in conn.execute(_COMPLETE_MANY_PG, params)}
    dbapi = database.sqlite_dbapi(conn)
    assert dbapi is not None
    # On the driver's cursor: through SQLAlchemy this statement (its IN list of pairs expanded
    # and compiled per call) was ~9% of the server's own samples under a source's load.
    values: list[Any] = [JobState.DONE.value, now_ms, JobState.RUNNING.value]
    for job in held:
        values += (job.id, job.claim)
    cursor = dbapi.cursor()
    try:
        cursor.execute(_complete_many_sqlite(len(held)), values)
        return {int(row[0]) for row in cursor.fetchall()}
    finally:
        cursor.close()


def _complete_many_sqlite(n: int) -> str:
    """``complete_many_sync``'s statement on SQLite for ``n`` jobs (row values, SQLite 3.15+)."""
    pairs = ",".join(["(?,?)"] * n)  # placeholders only: every value is a parameter
    return (
        "UPDATE jobs SET status = ?, finished_ms = ?, locked_until_ms = NULL"  # noqa: S608
        f" WHERE status = ? AND (id, claim) IN (VALUES {pairs}) RETURNING id"
    )


async def complete(conn: AsyncConnection, job: Job, *, now_ms: int) -> bool:
    return await conn.run_sync(complete_sync, job, now_ms=now_ms)


async def retry_or_fail(
    conn: AsyncConnection,
    job: Job,
    *,
    now_ms: int,
    error: str,
    retry_at_ms: int | None,
) -> bool:
    """Queue again at ``retry_at_ms``, or fail for good when it is None; False (nothing
    written) when this claim is no longer the job's current one."""
    values: dict[str, Any] = {"last_error": error[:4000], "locked_until_ms": None}
    if retry_at_ms is None:
        values.update(status=JobState.FAILED, finished_ms=now_ms)
    else:
        values.update(status=JobState.QUEUED, run_after_ms=retry_at_ms)
    result = await conn.execute(t.update().where(_held([job])).values(**values))
    return bool(result.rowcount)


async def counts(conn: AsyncConnection, target_id: str | None = None) -> dict[str, int]:
    query = sa.select(t.c.status, sa.func.count()).group_by(t.c.status)
    if target_id is not None:
        query = query.where(t.c.target_id == target_id)
    return {r[0]: int(r[1]) for r in await conn.execute(query)}


async def delete_for(conn: AsyncConnection, target_id: str) -> None:
    await conn.execute(t.delete().where(t.c.target_id == target_id))


# Adding many jobs at once (the endpoints' group commit).


@dataclass(frozen=True)
class NewJob:
    kind: JobKind
    owner_id: str
    target_id: str
    payload: Any
    #: Stored already claimed by this worker, for ``lease_ms`` (a run that is under way when
    #: its job is stored: ``engine/runs/client_runs.py``); its id is always returned.
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
