"""Group commit of new jobs: the jobs asked for while one transaction commits share the next
(on PostgreSQL up to ``PG_FLUSHERS`` transactions are in flight at once).

On SQLite one commit costs ~1 ms of thread hand-offs through one connection, so a job per
transaction caps an endpoint near 500 requests a second whatever the concurrency. Here the
first caller starts a flush; callers arriving meanwhile queue up and go in the next flush,
those that need no id as one multi-row INSERT. ``enqueue`` returns only once its job is
committed (so a request is acknowledged only when durable), or raises what the transaction
raised. A lone caller pays one transaction, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice.clock import Clock
from sluice.storage import database, faults, jobs
from sluice.storage.jobs import NewJob

OnId = Callable[[int], None]

#: Rows per transaction at most: a bound on one flush's latency.
MAX_BATCH = 512
#: A flush of at least this many jobs means the endpoints are saturated: many requests wait
#: on the same commit (at 200 requests a second a flush carries one or two).
PRESSED_BATCH = 8
#: ... and ``pressed()`` says so for this long after it.
PRESSED_SECONDS = 0.25


#: Flushes in flight at once on PostgreSQL: a commit there waits for its WAL flush (ms), which
#: other connections' commits can share; SQLite has one writer, so one flush at a time.
PG_FLUSHERS = 4
#: A flusher's kept connection idle this long is pinged before its next flush.
PING_AFTER_SECONDS = 1.0


async def _discard(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()


class Enqueuer:
    def __init__(self, db: AsyncEngine, clock: Clock) -> None:
        self.writer = database.Writer(db)
        self.clock = clock
        self._pending: list[tuple[NewJob, OnId | None, asyncio.Future[int | None]]] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self.db = db
        self._postgres = database.is_postgres(db)
        self._max_flushers = PG_FLUSHERS if self._postgres else 1
        self._pressed_until = 0.0
        #: PostgreSQL: the flushers' connections between flushes, with when each was last used.
        self._idle: list[tuple[AsyncConnection, float]] = []

    def pressed(self) -> bool:
        """Whether a recent flush carried ``PRESSED_BATCH`` jobs or more: requests are arriving
        faster than one at a time (the job worker then yields to them)."""
        return time.monotonic() < self._pressed_until

    async def enqueue(self, job: NewJob, *, on_id: OnId | None = None) -> int | None:
        """Once the job is committed: its id when ``on_id`` is given (it costs a statement of
        its own), else None. ``on_id(id)`` runs right after the commit, before any other task
        can run: before a worker can claim the job."""
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._pending.append((job, on_id, future))
        if len(self._flushers) < self._max_flushers:
            self._flushers.add(asyncio.create_task(self._flush()))
        # A caller that goes away (client disconnect) cancels only its own future: the flush,
        # a task of its own, carries its job with the others' all the same.
        return await future

    async def _flush(self) -> None:
        try:
            await self._flush_pending()
        finally:
            # In the same step as the last look at _pending (no await between): a job queued
            # after it starts a flusher of its own. A done-callback would come a turn late.
            self._flushers.discard(asyncio.current_task())

    async def _flush_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            now = self.clock.now_ms()
            rows = [(job, on_id is not None) for job, on_id, _ in batch]
            if len(batch) >= PRESSED_BATCH:
                self._pressed_until = time.monotonic() + PRESSED_SECONDS
            try:
                ids = await self._write(rows, now)
            except Exception as exc:  # none of the batch is stored: all of it fails
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:
                for _, _, future in batch + self._pending:
                    future.cancel()
                self._pending = []
                raise
            for (_, on_id, future), job_id in zip(batch, ids, strict=True):
                if on_id is not None and job_id is not None:
                    on_id(job_id)
                if not future.done():
                    future.set_result(job_id)

    async def _write(self, rows: list[tuple[NewJob, bool]], now_ms: int) -> list[int | None]:
        if not self._postgres:
            return await self.writer(functools.partial(jobs.add_batch, batch=rows, now_ms=now_ms))
        # A connection per flusher, kept open: a pool checkout (with its pre-ping, a round trip)
        # per flush was a third of a small flush's time. One idle for a while is pinged first,
        # as the pool would (the server may have restarted meanwhile).
        conn = await self._pg_connection()
        try:
            raw = await conn.get_raw_connection()
            ids = await jobs.add_batch_asyncpg(raw.driver_connection, rows, now_ms=now_ms)
        except BaseException as exc:
            await _discard(conn)  # a failed connection is not used again
            faults.raise_if_unavailable(exc)  # asyncpg's own errors: not through SQLAlchemy
            raise
        self._idle.append((conn, time.monotonic()))
        return ids

    async def _pg_connection(self) -> AsyncConnection:
        while self._idle:
            conn, since = self._idle.pop()
            if time.monotonic() - since < PING_AFTER_SECONDS:
                return conn
            try:
                driver: Any = (await conn.get_raw_connection()).driver_connection
                await driver.fetchval("SELECT 1")
                return conn
            except Exception:
                await _discard(conn)
        return await self.db.connect()

    async def close(self) -> None:
        for flusher in list(self._flushers):
            with contextlib.suppress(Exception):
                await flusher
        for conn, _ in self._idle:
            await _discard(conn)
        self._idle = []
        self.writer.dispose()
