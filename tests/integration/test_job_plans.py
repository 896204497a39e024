"""PostgreSQL: a claim and the due timer's look read a few index entries however long the queue,
even with statistics taken when the table was empty (autovacuum analyzes up to a minute after a
burst). Measured with the transaction's own counters of index entries read
(``pg_stat_get_xact_tuples_returned``). Before: each claim read every queued job and sorted them
(32 ms at 64,000 queued), and each look of the due timer read them all too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.domain.states import JobKind
from sluice.storage import database, jobs
from sluice.storage.jobs import NewJob
from tests.conftest import _create_pg_database, _drop_pg_database

QUEUED = 3000
KIND = JobKind.WORKFLOW


@pytest_asyncio.fixture(loop_scope="session")
async def queue() -> AsyncIterator[AsyncEngine]:
    """A fresh database analyzed while its jobs table was empty, then a burst of jobs."""
    url = await _create_pg_database()
    db = await database.open_database(url)
    try:
        async with db.connect() as conn:
            await conn.exec_driver_sql("ANALYZE jobs")
            await conn.commit()
            raw = await conn.get_raw_connection()
            batch = [(NewJob(KIND, "u_p", "dc_p", {"i": i}), False) for i in range(QUEUED)]
            await jobs.add_batch_asyncpg(raw.driver_connection, batch, now_ms=1_000)
        yield db
    finally:
        await db.dispose()
        await _drop_pg_database(url)


def _read(conn: Connection, index: str) -> int:
    """Index entries this transaction read from ``index`` so far."""
    value = conn.exec_driver_sql(
        f"SELECT pg_stat_get_xact_tuples_returned('{index}'::regclass)"
    ).scalar()
    return int(value or 0)


async def _in_transaction(db: AsyncEngine, fn: Any) -> Any:
    async with db.begin() as conn:
        return await conn.run_sync(fn)


async def test_a_claim_walks_the_queue_in_order_and_stops(queue: AsyncEngine) -> None:
    def claim(conn: Connection) -> tuple[list[int], int]:
        taken = jobs.claim_sync(
            conn, worker_id="w", now_ms=2_000, lease_ms=60_000, limit=4, kinds=(KIND,)
        )
        return [job.payload["i"] for job in taken], _read(conn, "ix_jobs_status_id")

    taken, read = await _in_transaction(queue, claim)
    assert taken == [0, 1, 2, 3]  # the oldest first
    assert read < 50, f"the claim read {read} index entries for 4 jobs"


async def test_the_next_due_job_is_one_probe_of_the_deferred(queue: AsyncEngine) -> None:
    def look(conn: Connection) -> tuple[int | None, int]:
        due = jobs.next_due_sync(conn, now_ms=2_000, kinds=(KIND,))
        return due, _read(conn, "ix_jobs_status_id")

    due, read = await _in_transaction(queue, look)
    assert due is None  # every job was due when made: none is for the timer
    assert read < 10, f"the look read {read} entries of the claims' index"

    def retried(conn: Connection) -> None:
        [job] = jobs.claim_sync(
            conn, worker_id="w", now_ms=2_000, lease_ms=60_000, limit=1, kinds=(KIND,)
        )
        conn.exec_driver_sql(
            "UPDATE jobs SET status = 'queued', run_after_ms = 9000, worker_id = NULL "
            f"WHERE id = {job.id}"
        )

    await _in_transaction(queue, retried)
    due, read = await _in_transaction(queue, look)
    assert due == 9000
    assert read < 10
