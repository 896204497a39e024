"""Durable jobs: claimed once, done with their results, retried with backoff, re-run after a
lease expires (a worker that died), on both dialects. A fake clock moves time.

Each test has the job queue to itself (``empty_queue``): it runs jobs of a real kind and counts
every job in the table."""

from __future__ import annotations

import asyncpg
import pytest
import sqlalchemy as sa

from sluice import errors
from sluice.clock import FakeClock
from sluice.domain.admission import Pace
from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import Finish, JobWorker, RanNow, WorkerConfig
from sluice.platform import Platform
from sluice.storage import database, jobs
from sluice.storage.jobs import Job
from sluice.storage.tables import jobs as jobs_table

pytestmark = pytest.mark.usefixtures("empty_queue")


async def _enqueue(platform: Platform, clock: FakeClock, kind: JobKind, n: int = 1) -> list[int]:
    ids = []
    async with platform.db.begin() as conn:
        for i in range(n):
            ids.append(
                await jobs.enqueue(
                    conn,
                    kind=kind,
                    owner_id="u_x",
                    target_id="dc_x",
                    payload={"i": i},
                    now_ms=clock.now_ms(),
                )
            )
    return ids


async def _status(platform: Platform, job_id: int) -> tuple[str, int]:
    async with platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(jobs_table.c.status, jobs_table.c.attempts).where(
                    jobs_table.c.id == job_id
                )
            )
        ).one()
    return row.status, row.attempts


@pytest.fixture
def kind() -> JobKind:
    return JobKind.WORKFLOW


#: What the handlers below store with a job's done mark: a job of a kind the workers here never
#: claim.
RESULT = JobKind.SEND


async def test_each_job_runs_once_and_is_done_with_its_results(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    worker = JobWorker(platform.db, clock)
    seen: list[int] = []
    kinds: set[object] = set()

    async def handler(job: Job, finish: Finish) -> None:
        async with platform.db.begin() as conn:
            seen.append(job.payload["i"])
            kinds.add(type(job.kind))
            await conn.run_sync(finish)

    worker.handlers[kind] = handler
    ids = await _enqueue(platform, clock, kind, 5)
    assert await worker.drain() == 5
    assert sorted(seen) == [0, 1, 2, 3, 4]
    assert kinds == {JobKind}  # a claimed job's kind is typed, not the column's str
    assert [await _status(platform, i) for i in ids] == [("done", 1)] * 5
    assert await worker.drain() == 0


async def test_failures_retry_with_backoff_then_fail(platform: Platform, kind: JobKind) -> None:
    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(max_attempts=3))
    calls = 0

    async def handler(job: Job, finish: Finish) -> None:
        nonlocal calls
        calls += 1
        raise errors.RunnerCrashed("runner crashed")

    worker.handlers[kind] = handler
    (job_id,) = await _enqueue(platform, clock, kind)
    assert await worker.run_once() == 1
    assert await _status(platform, job_id) == ("queued", 1)
    assert await worker.run_once() == 0  # not before its backoff (1 s)
    clock.advance(seconds=1)
    assert await worker.run_once() == 1
    clock.advance(seconds=2)
    assert await worker.run_once() == 1
    assert await _status(platform, job_id) == ("failed", 3)
    clock.advance(seconds=600)
    assert await worker.run_once() == 0 and calls == 3


async def test_a_store_outage_never_fails_a_job_for_good(
    platform: Platform, kind: JobKind, caplog: pytest.LogCaptureFixture
) -> None:
    """A run whose results could not be stored (disk full, PostgreSQL down) is queued again
    past ``max_attempts``: an acknowledged request is never failed by an outage. Each is one
    warning, without a stack."""
    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(max_attempts=2))
    outage = True
    stored: list[int] = []

    async def handler(job: Job, finish: Finish) -> None:
        if outage:
            raise errors.StorageUnavailable("the disk is full")
        stored.append(job.id)

    worker.handlers[kind] = handler
    (job_id,) = await _enqueue(platform, clock, kind)
    for _ in range(4):
        assert await worker.run_once() == 1
        clock.advance(seconds=300)
    assert await _status(platform, job_id) == ("queued", 4)
    failures = [r for r in caplog.records if getattr(r, "action", None) == "job_failed"]
    assert len(failures) == 4
    assert [(r.levelname, bool(r.exc_info)) for r in failures] == [("WARNING", False)] * 4
    outage = False
    assert await worker.run_once() == 1 and stored == [job_id]
    assert await _status(platform, job_id) == ("done", 5)


async def test_a_dead_workers_job_runs_again_after_its_lease(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    (job_id,) = await _enqueue(platform, clock, kind)
    async with platform.db.begin() as conn:  # a worker claims it, then "dies"
        claimed = await jobs.claim(
            conn, worker_id="dead", now_ms=clock.now_ms(), lease_ms=60_000, limit=10, kinds=(kind,)
        )
    assert [j.id for j in claimed] == [job_id]
    survivor = JobWorker(platform.db, clock)
    done: list[int] = []

    async def handler(job: Job, finish: Finish) -> None:
        done.append(job.id)

    survivor.handlers[kind] = handler
    assert await survivor.run_once() == 0  # leased to the dead worker
    clock.advance(seconds=61)
    assert await survivor.run_once() == 1 and done == [job_id]
    assert await _status(platform, job_id) == ("done", 2)
    # The dead worker coming back cannot mark it done a second time.
    async with platform.db.begin() as conn:
        assert not await jobs.complete(conn, claimed[0], now_ms=clock.now_ms())


async def test_concurrent_claims_never_share_a_job(platform: Platform, kind: JobKind) -> None:
    import asyncio

    clock = FakeClock()
    await _enqueue(platform, clock, kind, 40)

    async def take(worker: str) -> list[int]:
        taken: list[int] = []
        while True:
            async with platform.db.begin() as conn:
                batch = await jobs.claim(
                    conn,
                    worker_id=worker,
                    now_ms=clock.now_ms(),
                    lease_ms=60_000,
                    limit=3,
                    kinds=(kind,),
                )
            if not batch:
                return taken
            taken += [j.id for j in batch]

    results = await asyncio.gather(*(take(f"w{i}") for i in range(4)))
    flat = [j for r in results for j in r]
    assert len(flat) == 40 and len(set(flat)) == 40


async def test_a_claim_takes_expired_leases_then_the_oldest_queued(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    first, second, third, fourth = await _enqueue(platform, clock, kind, 4)
    async with platform.db.begin() as conn:  # "dead" takes the two oldest, then vanishes
        taken = await jobs.claim(
            conn, worker_id="dead", now_ms=clock.now_ms(), lease_ms=1_000, limit=2, kinds=(kind,)
        )
    assert [j.id for j in taken] == [first, second]
    clock.advance(seconds=2)
    async with platform.db.begin() as conn:
        taken = await jobs.claim(
            conn, worker_id="w", now_ms=clock.now_ms(), lease_ms=60_000, limit=3, kinds=(kind,)
        )
        rest = await jobs.claim(
            conn, worker_id="w", now_ms=clock.now_ms(), lease_ms=60_000, limit=3, kinds=(kind,)
        )
    # Both expired leases, then the oldest queued job; the last one is left for the next claim.
    assert [(j.id, j.attempts) for j in taken] == [(first, 2), (second, 2), (third, 1)]
    assert [j.id for j in rest] == [fourth]


async def test_done_jobs_are_pruned_after_their_retention(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(retention_ms=60_000))

    async def handler(job: Job, finish: Finish) -> None:
        if job.payload["i"] == 2:
            raise ValueError("fails for good")

    worker.handlers[kind] = handler
    ids = await _enqueue(platform, clock, kind, 3)
    async with platform.db.begin() as conn:  # the failing one fails at once (no retries left)
        await conn.execute(jobs_table.update().where(jobs_table.c.id == ids[2]).values(attempts=10))
    assert await worker.drain() == 3
    clock.advance(seconds=59)
    await worker.prune()
    assert [await _status(platform, i) for i in ids] == [("done", 1), ("done", 1), ("failed", 11)]
    clock.advance(seconds=2)
    assert await worker.prune() == 2
    async with platform.db.connect() as conn:
        left = (await conn.execute(sa.select(jobs_table.c.id))).scalars()
        assert list(left) == [ids[2]]  # failed jobs are kept


@pytest.mark.parametrize("pace", list(Pace))
async def test_under_pressure_the_background_loop_runs_one_job_at_a_time(
    platform: Platform, kind: JobKind, pace: Pace
) -> None:
    """While the endpoints are saturated (``pace``: requests first, or keeping up), jobs run
    one after another; otherwise up to ``concurrency`` at once (the control: the same jobs
    overlap)."""
    import asyncio

    clock = FakeClock()
    worker = JobWorker(
        platform.db, clock, WorkerConfig(concurrency=4, pressed_pause_ms=0, poll_seconds=30)
    )
    worker.pace = lambda: pace
    running, peak = 0, 0
    started: asyncio.Queue[int] = asyncio.Queue()
    releases = {i: asyncio.Event() for i in range(3)}

    async def handler(job: Job, finish: Finish) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await started.put(job.payload["i"])
        await releases[job.payload["i"]].wait()
        running -= 1

    worker.handlers[kind] = handler
    await _enqueue(platform, clock, kind, 3)
    await worker.start()
    worker.notify()
    try:
        order = []
        for _ in range(3):
            i = await asyncio.wait_for(started.get(), 30)
            order.append(i)
            releases[i].set()
        while worker._running:
            await asyncio.gather(*list(worker._running))
    finally:
        # A wake-up (the last job's end) meeting stop()'s cancel once hung the loop's wait.
        await worker.stop()
    assert sorted(order) == [0, 1, 2]
    assert (peak > 1) if pace is Pace.FULL else (peak == 1)


@pytest.mark.parametrize("pace", [Pace.KEEP_UP, Pace.REQUESTS_FIRST])
async def test_keeping_up_runs_one_job_after_another_without_the_pause(
    platform: Platform, kind: JobKind, pace: Pace
) -> None:
    """Keeping up (a backlog past ``requests_first_wait_seconds``): one job at a time, the next
    as soon as one ends; requests first pauses after each (here over an hour: the second job
    does not start), but not before the first."""
    import asyncio
    import time

    clock = FakeClock()
    # A pause longer than the machine has been up (the monotonic clock counts from boot): the
    # first job owes no pause, however recently the machine started.
    pause_ms = (time.monotonic() + 3600) * 1000
    worker = JobWorker(
        platform.db, clock, WorkerConfig(concurrency=4, pressed_pause_ms=pause_ms, poll_seconds=30)
    )
    worker.pace = lambda: pace
    ran: asyncio.Queue[int] = asyncio.Queue()

    async def handler(job: Job, finish: Finish) -> None:
        await ran.put(job.payload["i"])

    worker.handlers[kind] = handler
    await _enqueue(platform, clock, kind, 3)
    await worker.start()
    worker.notify()
    try:
        assert await asyncio.wait_for(ran.get(), 30) == 0  # the pause comes after a job
        if pace is Pace.KEEP_UP:
            assert [await asyncio.wait_for(ran.get(), 30) for _ in range(2)] == [1, 2]
        else:
            # The loop is in its pause (an hour): nothing else starts meanwhile.
            for _ in range(20):
                await asyncio.sleep(0)
            await asyncio.gather(*list(worker._running))
            assert ran.empty()
    finally:
        await worker.stop()


async def test_a_job_claimed_but_not_started_runs_now_or_is_released(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(concurrency=1))
    ran: list[int] = []

    async def handler(job: Job, finish: Finish) -> None:
        ran.append(job.id)

    worker.handlers[kind] = handler
    ids = await _enqueue(platform, clock, kind, 3)
    worker._queue.extend(await worker._claim(10))  # as the loop does, before starting them
    # A request waiting on its run takes its job from the local queue at once.
    assert await worker.run_now(ids[1]) is RanNow.DONE and ran == [ids[1]]
    await worker.stop()  # the two never started are queued again, not left to their leases
    assert [await _status(platform, i) for i in ids] == [
        ("queued", 0),
        ("done", 1),
        ("queued", 0),
    ]
    other = JobWorker(platform.db, clock)
    other.handlers[kind] = handler
    assert await other.drain() == 2 and sorted(ran) == sorted(ids)


async def test_requests_first_is_on_by_default_and_can_be_turned_off(platform: Platform) -> None:
    import dataclasses

    assert platform.jobs.pace is not None  # the ingress's group commits, the backlog's wait
    settings = dataclasses.replace(platform.settings, requests_first=False)
    async with Platform.open(settings, background=False) as other:
        assert other.jobs.pace is None


async def test_an_account_over_its_share_waits_queued_in_order(
    platform: Platform, kind: JobKind
) -> None:
    """With a share of 2 of 3 slots, the flooding account runs 2 jobs at once; of its others,
    one claimed beside them is held by the worker (not started: it starts when one of the
    two ends, with no claim), the rest stay queued (not failed, not reordered), while another
    account's job starts in the free slot."""
    import asyncio

    clock = FakeClock()
    worker = JobWorker(
        platform.db, clock, WorkerConfig(concurrency=3, account_share=2, poll_seconds=30)
    )
    started: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    release = asyncio.Event()

    async def handler(job: Job, finish: Finish) -> None:
        await started.put((job.owner_id, job.payload["i"]))
        if job.owner_id == "u_flood":
            await release.wait()

    worker.handlers[kind] = handler
    async with platform.db.begin() as conn:
        flood = [
            await jobs.enqueue(
                conn,
                kind=kind,
                owner_id="u_flood",
                target_id="dc_f",
                payload={"i": i},
                now_ms=clock.now_ms(),
            )
            for i in range(5)
        ]
        await jobs.enqueue(
            conn,
            kind=kind,
            owner_id="u_other",
            target_id="dc_o",
            payload={"i": 0},
            now_ms=clock.now_ms(),
        )
    await worker.start()
    worker.notify()
    try:
        first = {await asyncio.wait_for(started.get(), 30) for _ in range(3)}
        assert first == {("u_flood", 0), ("u_flood", 1), ("u_other", 0)}
        held = ["running"] * 3  # two started, one held
        assert [(await _status(platform, i))[0] for i in flood] == held + ["queued"] * 2
        assert [j.payload["i"] for j in worker._queue] == [2]
        release.set()
        rest = [await asyncio.wait_for(started.get(), 30) for _ in range(3)]
        assert [i for _, i in rest] == [2, 3, 4]  # the account's order is kept
        while worker._running:
            await asyncio.gather(*list(worker._running))
    finally:
        await worker.stop()
    assert [await _status(platform, i) for i in flood] == [("done", 1)] * 5


async def test_a_held_job_keeps_its_lease_and_a_dead_ones_lapses(
    platform: Platform, kind: JobKind
) -> None:
    """Leases are short and renewed while a job runs: a long job is never taken from its
    worker, and a job whose worker stopped renewing (died) runs again within one lease."""
    import asyncio

    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000))
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(job: Job, finish: Finish) -> None:
        started.set()
        await release.wait()

    worker.handlers[kind] = slow
    (job_id,) = await _enqueue(platform, clock, kind)
    running = asyncio.create_task(worker.run_once())
    await started.wait()
    other = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000))
    taken: list[int] = []

    async def record(job: Job, finish: Finish) -> None:
        taken.append(job.id)

    other.handlers[kind] = record
    clock.advance(seconds=15)
    assert await worker.heartbeat() == 1  # held again until 15 + 22.5 s
    clock.advance(seconds=20)  # 35 s after the claim: past the first hold, not the renewed one
    assert await other.run_once() == 0 and taken == []
    clock.advance(seconds=4)  # 24 s without a renewal (it stalled): taken over, within a lease
    assert await other.run_once() == 1 and taken == [job_id]
    release.set()
    await running
    assert await _status(platform, job_id) == ("done", 2)


async def test_stop_lets_the_jobs_in_flight_finish(platform: Platform, kind: JobKind) -> None:
    import asyncio

    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(poll_seconds=30))
    started, release = asyncio.Event(), asyncio.Event()
    cancelled: list[int] = []

    async def handler(job: Job, finish: Finish) -> None:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise
        async with platform.db.begin() as conn:
            await conn.run_sync(finish)

    worker.handlers[kind] = handler
    (job_id,) = await _enqueue(platform, clock, kind)
    await worker.start()
    worker.notify()
    await started.wait()
    stopping = asyncio.create_task(worker.stop(grace_seconds=600))
    release.set()  # the job ends during the grace period
    await stopping
    assert cancelled == [] and await _status(platform, job_id) == ("done", 1)


async def test_stop_queues_what_it_could_not_finish_again_at_once(
    platform: Platform, kind: JobKind
) -> None:
    """The grace period over (or cut short by a second signal: ``hurry``), the jobs still
    running are stopped and queued again at once, for the next worker: not after a lease."""
    import asyncio

    clock = FakeClock()
    worker = JobWorker(platform.db, clock, WorkerConfig(poll_seconds=30))
    started = asyncio.Event()

    async def stuck(job: Job, finish: Finish) -> None:
        started.set()
        await asyncio.Event().wait()

    worker.handlers[kind] = stuck
    (job_id,) = await _enqueue(platform, clock, kind)
    await worker.start()
    worker.notify()
    await started.wait()
    stopping = asyncio.create_task(worker.stop(grace_seconds=600))
    worker.hurry()
    await stopping
    assert await _status(platform, job_id) == ("queued", 0)
    ran: list[int] = []

    async def record(job: Job, finish: Finish) -> None:
        ran.append(job.id)

    after = JobWorker(platform.db, clock)  # the same instant: no lease to wait for
    after.handlers[kind] = record
    assert await after.drain() == 1 and ran == [job_id]


async def _results(platform: Platform) -> list[int]:
    """The ``RESULT`` jobs: what the handlers below store with their done mark."""
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.payload).where(jobs_table.c.kind == RESULT)
        )
        return sorted(int(row.payload["of"]) for row in rows)


def _storing(platform: Platform, worker: JobWorker) -> object:
    """A transaction storing a job's result (a ``RESULT`` job) with its done
    mark, as ``engine/state/commit.py`` stores a run with it."""

    async def store(job: Job, finish: Finish) -> None:
        def transaction(conn: sa.Connection) -> None:
            jobs.enqueue_sync(
                conn,
                kind=RESULT,
                owner_id="u_x",
                target_id="dc_x",
                payload={"of": job.id, "by": worker.worker_id},
                now_ms=worker.clock.now_ms(),
            )
            finish(conn)

        await worker.writer(transaction)

    return store


async def test_a_worker_that_stalled_past_its_lease_stores_nothing_twice(
    platform: Platform, kind: JobKind
) -> None:
    """Fencing: a worker stalls (SIGSTOP, a VM pause: no renewal) past its lease, another takes
    its jobs over and stores their results; when the first wakes, its result for the job it
    was running is refused with its done mark (rolled back together), and the job it had
    claimed and not started is not started at all."""
    import asyncio

    clock = FakeClock()
    stalled = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000, concurrency=1))
    store = _storing(platform, stalled)
    started, wake = asyncio.Event(), asyncio.Event()
    ran: list[int] = []

    async def stalling(job: Job, finish: Finish) -> None:
        ran.append(job.id)
        started.set()
        await wake.wait()  # the stall: no heartbeat runs meanwhile
        await store(job, finish)  # type: ignore[operator]

    stalled.handlers[kind] = stalling
    first, second = await _enqueue(platform, clock, kind, 2)
    running = asyncio.create_task(stalled.run_once())  # claims both; runs one at a time
    await started.wait()

    clock.advance(seconds=31)
    other = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000))
    other.handlers[kind] = _storing(platform, other)  # type: ignore[assignment]
    assert await other.run_once() == 2  # both taken over and stored

    wake.set()
    await running
    assert ran == [first]  # the second, claimed before the stall, was never started
    assert await _results(platform) == [first, second]  # each stored once
    assert await _status(platform, first) == ("done", 2)
    assert await _status(platform, second) == ("done", 2)


@pytest.mark.parametrize("platform", ["postgresql"], indirect=True)
async def test_a_worker_stopped_in_the_middle_of_a_statement_is_taken_over(
    platform: Platform, kind: JobKind
) -> None:
    """PostgreSQL only (SQLite has one process; its stalled lock holder is
    tests/chaos/test_sqlite_stall.py). A worker stopped between a prepared statement and its
    execution, in the transaction that marks its job done: the job's row stays locked and every
    claim skips it, past its lease, and PostgreSQL's idle timeout does not end that session.
    The other worker's heartbeat does (``Leases.end_stalled``); its next claim takes the job
    over and stores it, once."""
    clock = FakeClock()
    (job_id,) = await _enqueue(platform, clock, kind)
    async with platform.db.begin() as conn:
        [held] = await jobs.claim(
            conn, worker_id="stalled", now_ms=clock.now_ms(), lease_ms=1_000, limit=1,
            kinds=(kind,),
        )  # fmt: skip
    stopped = await asyncpg.connect(
        platform.settings.database_url,
        timeout=5,
        server_settings={"application_name": database.APPLICATION_NAME},  # a Sluice process's
    )
    try:
        transaction = stopped.transaction()
        await transaction.start()
        await stopped.execute(
            "UPDATE jobs SET status = 'done' WHERE id = $1 AND claim = $2", held.id, held.claim
        )
        await stopped.prepare("SELECT now()")  # stopped here (SIGSTOP), mid-statement
        # The backend sends the statement's description before it waits for the rest: on a
        # busy machine the heartbeat could look before it is seen waiting (seen under -n 3).
        await _seen_waiting_for_client(platform, stopped.get_server_pid())

        clock.advance(seconds=2)  # its lease passed
        other = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000, stalled_session_ms=0))
        other.handlers[kind] = _storing(platform, other)  # type: ignore[assignment]
        assert await other.run_once() == 0  # its row is locked: the claim skips it
        await other.heartbeat()  # ends the stopped session, whose lock goes with it
        clock.advance(ms=WorkerConfig.expired_every_ms)  # its next look for leases
        assert await other.run_once() == 1
        assert await _results(platform) == [job_id]
        assert await _status(platform, job_id) == ("done", 2)
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            await stopped.fetch("SELECT 1")  # when it wakes: nothing of it commits
    finally:
        stopped.terminate()


async def _seen_waiting_for_client(platform: Platform, pid: int) -> None:
    """Until ``pg_stat_activity`` shows backend ``pid`` waiting for its client mid-statement
    (what ``database.end_stalled_sessions`` looks for); at most 10 s."""
    import asyncio
    import time

    query = sa.text(
        "SELECT state = 'active' AND wait_event = 'ClientRead' FROM pg_stat_activity"
        " WHERE pid = :pid"
    )
    deadline = time.monotonic() + 10
    while True:
        async with platform.db.connect() as conn:
            if await conn.scalar(query, {"pid": pid}):
                return
        assert time.monotonic() < deadline, f"backend {pid} never seen waiting for its client"
        await asyncio.sleep(0.005)


async def test_a_stalled_workers_failure_leaves_the_job_of_its_new_holder(
    platform: Platform, kind: JobKind
) -> None:
    """A worker whose lease passed cannot queue again, or fail, a job another worker holds or
    finished: its retry is fenced like its results."""
    import asyncio

    clock = FakeClock()
    stalled = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000))
    started, wake = asyncio.Event(), asyncio.Event()

    async def failing(job: Job, finish: Finish) -> None:
        started.set()
        await wake.wait()
        raise RuntimeError("the stalled worker's run failed")

    stalled.handlers[kind] = failing
    (job_id,) = await _enqueue(platform, clock, kind)
    running = asyncio.create_task(stalled.run_once())
    await started.wait()
    clock.advance(seconds=31)
    other = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000))
    other.handlers[kind] = _storing(platform, other)  # type: ignore[assignment]
    assert await other.run_once() == 1
    wake.set()
    await running
    assert await _status(platform, job_id) == ("done", 2)
    clock.advance(seconds=600)
    assert await other.run_once() == 0
    assert await _results(platform) == [job_id]


async def test_a_renewal_extends_only_the_claims_still_held(
    platform: Platform, kind: JobKind
) -> None:
    clock = FakeClock()
    first, second = await _enqueue(platform, clock, kind, 2)
    async with platform.db.begin() as conn:
        held = await jobs.claim(
            conn, worker_id="a", now_ms=clock.now_ms(), lease_ms=1_000, limit=2, kinds=(kind,)
        )
    clock.advance(seconds=2)
    async with platform.db.begin() as conn:  # "b" takes the first over
        [taken] = await jobs.claim(
            conn, worker_id="b", now_ms=clock.now_ms(), lease_ms=60_000, limit=1, kinds=(kind,)
        )
    assert taken.id == first and taken.claim == held[0].claim + 1
    async with platform.db.begin() as conn:
        renewed = await conn.run_sync(
            lambda c: jobs.renew_sync(c, held, until_ms=clock.now_ms() + 60_000)
        )
        # Released by "a": only the job it still holds goes back to the queue.
        await conn.run_sync(lambda c: jobs.release_sync(c, held))
    assert renewed == {second}
    assert await _status(platform, first) == ("running", 2)
    assert await _status(platform, second) == ("queued", 0)


async def test_a_batch_is_marked_done_only_where_its_claim_is_still_held(
    platform: Platform, kind: JobKind
) -> None:
    """``complete_many_sync`` (the batch path's done marks, one statement): a job taken over by
    another worker, or no longer running, is not marked, whatever its place in the batch."""
    clock = FakeClock()
    ids = await _enqueue(platform, clock, kind, 4)
    async with platform.db.begin() as conn:
        held = await jobs.claim(
            conn, worker_id="a", now_ms=clock.now_ms(), lease_ms=1_000, limit=4, kinds=(kind,)
        )
    assert [job.id for job in held] == ids
    clock.advance(seconds=2)
    async with platform.db.begin() as conn:  # "b" takes the first over
        [taken] = await jobs.claim(
            conn, worker_id="b", now_ms=clock.now_ms(), lease_ms=60_000, limit=1, kinds=(kind,)
        )
    async with platform.db.begin() as conn:  # the third was marked done alone already
        assert await jobs.complete(conn, held[2], now_ms=clock.now_ms())
    async with platform.db.begin() as conn:
        done = await conn.run_sync(
            lambda c: jobs.complete_many_sync(c, held[::-1], now_ms=clock.now_ms())
        )
    assert taken.id == ids[0]
    assert done == {ids[1], ids[3]}
    assert await _status(platform, ids[0]) == ("running", 2)
    assert [await _status(platform, i) for i in ids[1:]] == [("done", 1)] * 3
    async with platform.db.begin() as conn:  # its holder's mark: once, by its own claim
        assert await conn.run_sync(lambda c: jobs.complete_many_sync(c, [taken], now_ms=0)) == {
            ids[0]
        }
        assert await conn.run_sync(lambda c: jobs.complete_many_sync(c, [], now_ms=0)) == set()
