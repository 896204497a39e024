"""The job worker wakes when a queued job becomes due (``engine/queue/jobs.DueTimer``), not at its
next poll: a fake clock, a poll interval of an hour, both dialects. Nothing here sleeps: the
test waits for the worker's timer to be armed, then moves the clock."""

from __future__ import annotations

import asyncio

import pytest

from sluice.clock import FakeClock
from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import Finish, JobWorker, WorkerConfig
from sluice.platform import Platform
from sluice.storage import jobs
from sluice.storage.jobs import Job

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: real kinds claimed

#: Far longer than any test waits: a job that runs did not wait for a poll.
HOUR = WorkerConfig(poll_seconds=3600)
#: Real seconds a step may take (Node is not involved; the database is).
PATIENCE = 20


async def enqueue(platform: Platform, kind: JobKind, now_ms: int, run_after_ms: int) -> int:
    async with platform.db.begin() as conn:
        return await jobs.enqueue(
            conn,
            kind=kind,
            owner_id="u_due",
            target_id="dc_due",
            payload={},
            now_ms=now_ms,
            run_after_ms=run_after_ms,
        )


async def test_a_delayed_job_runs_when_the_clock_reaches_its_time(platform: Platform) -> None:
    clock, kind = FakeClock(), JobKind.WORKFLOW
    start = clock.now_ms()
    ran: asyncio.Queue[tuple[int, int]] = asyncio.Queue()

    async def handler(job: Job, finish: Finish) -> None:
        await ran.put((job.id, clock.now_ms()))

    worker = JobWorker(platform.db, clock, HOUR, {kind: handler})
    await worker.start()
    try:
        later = await enqueue(platform, kind, start, start + 120_000)
        worker.notify()
        await asyncio.wait_for(clock.until_sleeping(start + 120_000), PATIENCE)
        assert worker.due.armed_ms == start + 120_000

        # An earlier job enqueued meanwhile re-arms the timer for its own time.
        sooner = await enqueue(platform, kind, start, start + 30_000)
        worker.notify()
        await asyncio.wait_for(clock.until_sleeping(start + 30_000), PATIENCE)
        clock.advance(seconds=29)
        assert ran.empty() and worker.due.armed_ms == start + 30_000
        clock.advance(seconds=1)
        assert await asyncio.wait_for(ran.get(), PATIENCE) == (sooner, start + 30_000)

        # Then the one after it, from the queue: armed again once the worker idles.
        await asyncio.wait_for(clock.until_sleeping(start + 120_000), PATIENCE)
        assert ran.empty()
        clock.advance(seconds=90)
        assert await asyncio.wait_for(ran.get(), PATIENCE) == (later, start + 120_000)
    finally:
        await worker.stop()
    assert worker.due.armed_ms is None


async def test_a_retry_backoff_wakes_the_worker_too(platform: Platform) -> None:
    clock, kind = FakeClock(), JobKind.WORKFLOW
    attempts: asyncio.Queue[int] = asyncio.Queue()

    async def flaky(job: Job, finish: Finish) -> None:
        await attempts.put(clock.now_ms())
        if job.attempts == 1:
            raise RuntimeError("first attempt fails")

    worker = JobWorker(platform.db, clock, HOUR, {kind: flaky})
    await worker.start()
    try:
        start = clock.now_ms()
        await enqueue(platform, kind, start, start)
        worker.notify()
        assert await asyncio.wait_for(attempts.get(), PATIENCE) == start
        # The retry is due after its backoff (1 s): the worker's timer, not a poll, runs it.
        await asyncio.wait_for(clock.until_sleeping(start + 1000), PATIENCE)
        clock.advance(seconds=1)
        assert await asyncio.wait_for(attempts.get(), PATIENCE) == start + 1000
    finally:
        await worker.stop()
