"""Chaos (issue 30): the wall clock of the process running the job worker is stepped, +120 s
and then -120 s, while it holds a job and while a delayed job waits. Nothing runs twice, the
delay ends on time (within the clock's 5% slew), and due work keeps being claimed after the
backward step. The kernel's clocks are fake sources (``tests/unit/test_clock.py``): a real
step moves the wall clock alone, as these do; the database and the job worker are real."""

from __future__ import annotations

import asyncio

import pytest

from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import Finish, JobWorker, WorkerConfig
from sluice.platform import Platform
from sluice.storage import jobs
from sluice.storage.jobs import Job
from tests.unit.test_clock import Sources

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: real kinds claimed


async def test_a_stepped_wall_clock_neither_doubles_runs_nor_ends_delays_early(
    platform: Platform,
) -> None:
    kind = JobKind.WORKFLOW
    sources = Sources()
    system = sources.system_clock()
    held = JobWorker(platform.db, system, WorkerConfig(lease_ms=30_000))
    other = JobWorker(platform.db, system, WorkerConfig(lease_ms=30_000))
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[tuple[str, int]] = []

    async def slow(job: Job, finish: Finish) -> None:
        runs.append(("held", job.id))
        started.set()
        await release.wait()

    async def record(job: Job, finish: Finish) -> None:
        runs.append(("other", job.id))

    held.handlers[kind], other.handlers[kind] = slow, record
    async with platform.db.begin() as conn:
        running_id = await jobs.enqueue(
            conn, kind=kind, owner_id="u_c", target_id="dc_c", payload={}, now_ms=system.now_ms()
        )
    running = asyncio.create_task(held.run_once())
    await started.wait()
    async with platform.db.begin() as conn:  # a $.flow.delay of 120 s
        delayed_id = await jobs.enqueue(
            conn,
            kind=kind,
            owner_id="u_c",
            target_id="dc_c",
            payload={},
            now_ms=system.now_ms(),
            run_after_ms=system.now_ms() + 120_000,
        )

    sources.wall_ms += 120_000  # the step forward
    sources.pass_time(1)
    assert await other.run_once() == 0  # the held job's lease did not end, the delay neither
    for _ in range(10):  # 100 s, the held job's lease renewed as it runs
        sources.pass_time(10)
        assert await held.heartbeat() == 1
        assert await other.run_once() == 0
    sources.pass_time(14)  # 115 s after the delay began: 5% fast makes 120.75 s
    assert await other.run_once() == 1
    assert runs == [("held", running_id), ("other", delayed_id)]

    sources.wall_ms -= 240_000  # and back, past where it started
    async with platform.db.begin() as conn:  # a job due now is still claimed at once
        due_id = await jobs.enqueue(
            conn, kind=kind, owner_id="u_c", target_id="dc_c", payload={}, now_ms=system.now_ms()
        )
    sources.pass_time(1)
    assert await other.run_once() == 1
    release.set()
    await running
    assert runs == [("held", running_id), ("other", delayed_id), ("other", due_id)]
