"""Load shedding's run rates (``engine/queue/admission.py``) over a real SQLite queue, read by
the real ``Admission.refresh`` at a fake clock's quarter seconds: a pause in which nothing ran
lowers the pace but is not measured as a rate of 0, jobs slower than a read are measured at
their own pace, and what ran across a storage outage is not measured at all. Each is checked
through what a client meets: how many requests ``take`` lets in before ``Overloaded``."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import sqlalchemy as sa

from sluice import errors
from sluice.clock import FakeClock
from sluice.domain.states import JobState
from sluice.engine.queue.admission import Admission, AdmissionPolicy
from sluice.storage import database, faults
from sluice.storage.tables import jobs

#: The bound an account's backlog is shed past (the default's): its backlog is let grow to what
#: its rate runs in a quarter of it, 15 s.
BOUND_MS = 60_000


class Queue:
    def __init__(self, engine: sa.Engine, clock: FakeClock) -> None:
        self.engine = engine
        self.clock = clock

    def add(self, owner: str, n: int) -> None:
        now = self.clock.now_ms()
        row = {
            "kind": "http",
            "owner_id": owner,
            "target_id": "dc_x",
            "status": JobState.QUEUED,
            "run_after_ms": now,
            "created_ms": now,
        }
        with self.engine.begin() as conn:
            conn.execute(jobs.insert(), [row] * n)

    def run(self, owner: str, n: int) -> None:
        """The oldest ``n`` of ``owner``'s queued jobs are done."""
        with self.engine.begin() as conn:
            ids = conn.scalars(
                sa.select(jobs.c.id)
                .where(jobs.c.owner_id == owner, jobs.c.status == JobState.QUEUED)
                .order_by(jobs.c.id)
                .limit(n)
            ).all()
            conn.execute(jobs.update().where(jobs.c.id.in_(ids)).values(status=JobState.DONE))


@pytest_asyncio.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Admission, Queue, FakeClock]]:
    path = tmp_path / "queue.db"
    sync = sa.create_engine(f"sqlite:///{path}")
    with sync.begin() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        jobs.create(conn)
    engine = database.create_engine(f"sqlite:///{path}")
    clock = FakeClock()
    admission = Admission(
        database.Reader(engine), clock, AdmissionPolicy(shed_after_ms=BOUND_MS, reserve_bytes=0)
    )
    try:
        yield admission, Queue(sync, clock), clock
    finally:
        await engine.dispose()
        sync.dispose()


def _taken(admission: Admission, owner: str, limit: int = 10_000) -> int:
    """How many requests ``owner`` is taken before the first ``Overloaded`` (bounded)."""
    for n in range(limit):
        try:
            admission.check(owner)
            admission.take(owner)
        except errors.Overloaded:
            return n
    return limit


async def _tick(admission: Admission, clock: FakeClock, reads: int = 1) -> None:
    """``reads`` reads of the queue, a quarter second apart (as ``Admission``'s task reads)."""
    for _ in range(reads):
        clock.advance(seconds=0.25)
        await admission.refresh()


async def test_a_pause_with_nothing_run_keeps_the_rate_it_ran_at(
    setup: tuple[Admission, Queue, FakeClock],
) -> None:
    admission, queue, clock = setup
    queue.add("u_a", 40)
    await admission.refresh()
    queue.run("u_a", 20)
    await _tick(admission, clock)  # 20 in a quarter second: 80 a second
    await _tick(admission, clock, 40)  # 10 s in which nothing runs (the store stalled, say)
    # Meanwhile its pace fell at each read: shed, though its oldest job is only 10 s old.
    with pytest.raises(errors.Overloaded):
        admission.check("u_a")
    queue.run("u_a", 1)  # it starts again
    await _tick(admission, clock)
    # Measured over the span in which it ran (1 in 10.25 s), smoothed with the 80 before: 40
    # a second, room for 15 s of that less its 19 queued. Each interval measured 0 before: 80
    # halved 40 times, 2 a second after the first job, room for 11 (CI, after a 15 s SQLite
    # stall: the 11th request refused).
    assert _taken(admission, "u_a") == 600 - 19


async def test_jobs_slower_than_a_read_are_measured_at_their_pace(
    setup: tuple[Admission, Queue, FakeClock],
) -> None:
    admission, queue, clock = setup
    queue.add("u_b", 8)
    await admission.refresh()
    for _ in range(3):  # one job every 2 s (8 reads)
        await _tick(admission, clock, 7)
        queue.run("u_b", 1)
        await _tick(admission, clock)
    # 0.5 a second: room for 7.5 jobs, less the 5 queued. It was 4 a second at each read
    # that saw a job end, halved at each that did not: ~2 a second, room for 25.
    assert _taken(admission, "u_b") == 2
    admission.check("u_b")  # not shed: its wait is 10 s


async def test_what_ran_across_a_storage_outage_is_not_measured(
    setup: tuple[Admission, Queue, FakeClock],
) -> None:
    admission, queue, clock = setup
    queue.add("u_c", 100)
    await admission.refresh()
    queue.run("u_c", 10)
    await _tick(admission, clock)  # 40 a second
    await _tick(admission, clock, 20)
    # The store refuses a write (a stalled lock holder's busy timeout), and in the same
    # interval a few jobs end.
    with pytest.raises(errors.StorageUnavailable):
        faults.raise_if_locked(sqlite3.OperationalError("database is locked"))
    queue.run("u_c", 5)
    await _tick(admission, clock)
    queue.run("u_c", 40)  # then it runs at 160 a second
    await _tick(admission, clock)
    # 160 smoothed with the 40 before the outage: 100 a second, room for 1,500 less the 45
    # queued. Measured across the outage (5 in 5.25 s), the rate would be ~90 and the
    # room 1,308.
    assert _taken(admission, "u_c") == 1500 - 45
