"""PostgreSQL pushes other processes' commits (``engine/notifications.py``, migrations 0009, 0011,
0025): a job added or queued again wakes a job worker, a stored event wakes the live streams of
its emitter, with the polls of both set to an hour (so only the push can explain the wake), and
a change to workflows moves the count the runs' copies of workflows are kept by."""

from __future__ import annotations

import asyncio
import collections
import secrets
from collections.abc import AsyncIterator

import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import FakeClock
from sluice.domain.states import JobKind
from sluice.engine import streams
from sluice.engine.notifications import Notifications, PushedChanges
from sluice.engine.queue.jobs import Finish, JobWorker, WorkerConfig
from sluice.engine.state import broker
from sluice.engine.state.broker import Broker
from sluice.storage import database, events, jobs
from sluice.storage.jobs import Job, NewJob
from tests.conftest import _create_pg_database, _drop_pg_database

HOUR = 3600.0
WAIT_S = 20.0


@pytest_asyncio.fixture(loop_scope="session")
async def postgres() -> AsyncIterator[tuple[str, AsyncEngine]]:
    url = await _create_pg_database()
    db = await database.open_database(url)
    try:
        yield url, db
    finally:
        await db.dispose()
        await _drop_pg_database(url)


async def _listening(listener: Notifications) -> None:
    listener.start()
    await asyncio.wait_for(listener.listening.wait(), WAIT_S)


async def test_an_added_or_requeued_job_wakes_a_worker(
    postgres: tuple[str, AsyncEngine],
) -> None:
    url, db = postgres
    clock = FakeClock()
    kind = JobKind.WORKFLOW  # a database of its own: no other test claims it
    worker = JobWorker(db, clock, WorkerConfig(poll_seconds=HOUR))
    ran: asyncio.Queue[int] = asyncio.Queue()

    async def handler(job: Job, finish: Finish) -> None:
        await ran.put(job.id)

    worker.handlers[kind] = handler
    woken: list[str | None] = []
    later: list[bool] = []
    heard: dict[str | None, asyncio.Event] = collections.defaultdict(asyncio.Event)

    def on_jobs(owner_id: str | None, due_now: bool) -> None:
        woken.append(owner_id)
        later.append(not due_now)
        heard[owner_id].set()
        worker.notify(owner_id, due_now=due_now)

    listener = Notifications(url, on_jobs, lambda _emitter: None)
    await _listening(listener)
    await worker.start()
    try:
        async with db.begin() as conn:  # another process's commit, as far as the worker knows
            job_id = await jobs.enqueue(
                conn, kind=kind, owner_id="u_n", target_id="dc_n", payload={}, now_ms=0
            )
        assert await asyncio.wait_for(ran.get(), WAIT_S) == job_id
        assert "u_n" in woken  # the notification names the job's account
        assert not later[woken.index("u_n")]  # ... and says it is due at once
        # A job queued again (released by a stopping worker) wakes the workers too.
        before = len(woken)
        async with db.begin() as conn:
            await conn.run_sync(
                lambda c: jobs.claim_sync(
                    c, worker_id="other", now_ms=1, lease_ms=HOUR * 1000, limit=1, kinds=(kind,)
                )
            )
            second = await jobs.enqueue(
                conn, kind=kind, owner_id="u_n", target_id="dc_n", payload={}, now_ms=0
            )
        assert await asyncio.wait_for(ran.get(), WAIT_S) == second
        assert len(woken) > before
        # A batch of several accounts' jobs (the endpoints' group commit) names each once.
        before = len(woken)
        async with db.begin() as conn:
            raw = await conn.get_raw_connection()
            await jobs.add_batch_asyncpg(
                raw.driver_connection,
                [(NewJob(kind, owner, "dc_n", {}), False) for owner in ("u_a", "u_b", "u_a")],
                now_ms=0,
            )
        # The pushes themselves are awaited: the worker, claiming again after its last job,
        # may run the batch before they arrive (seen once in CI).
        for owner in ("u_a", "u_b"):
            await asyncio.wait_for(heard[owner].wait(), WAIT_S)
        for _ in range(3):
            await asyncio.wait_for(ran.get(), WAIT_S)
        assert sorted(o for o in woken[before:] if o in ("u_a", "u_b")) == ["u_a", "u_b"]
        # A job due later (a retry's backoff) says so: the worker's due timer looks again.
        before = len(woken)
        async with db.begin() as conn:
            await jobs.enqueue(
                conn, kind=kind, owner_id="u_l", target_id="dc_n", payload={}, now_ms=0,
                run_after_ms=clock.now_ms() + HOUR * 1000,
            )  # fmt: skip
        await asyncio.wait_for(heard["u_l"].wait(), WAIT_S)
        assert later[woken.index("u_l", before)]
    finally:
        await worker.stop()
        await listener.close()


async def test_a_stored_event_wakes_the_streams_of_its_emitter(
    postgres: tuple[str, AsyncEngine],
) -> None:
    url, db = postgres
    hub = Broker()

    def stored(emitter_id: str) -> None:
        hub.publish(broker.stored_topic(emitter_id), [emitter_id])

    listener = Notifications(url, lambda _owner, _now: None, stored)
    await _listening(listener)
    emitter = f"dc_{secrets.token_hex(6)}"
    writer = database.Writer(db)

    async def store(n: int) -> None:
        await writer(
            lambda conn: events.append_sync(
                conn,
                emitter_id=emitter,
                owner_id="u_n",
                now_ms=1_000 + n,
                items=[("", {"n": n}, {})],
            )
        )

    await store(1)
    # From the start (a resumed stream): #1 is replayed, and the poll starts after it.
    stream = streams.open_emits(db, hub, emitter, after=(0, 0), channel=None, poll_seconds=HOUR)
    items = stream.items()
    try:
        _id, replayed = await asyncio.wait_for(anext(items), WAIT_S)
        assert replayed.payload == {"n": 1}
        await store(2)  # only the push can bring it now: the next poll is an hour away
        _id, pushed = await asyncio.wait_for(anext(items), WAIT_S)
        assert pushed.payload == {"n": 2}
    finally:
        writer.dispose()
        stream.close()
        await items.aclose()
        await listener.close()


class Moved(PushedChanges):
    """Pushed changes that say when they move (so a test waits for the push, not a time)."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = asyncio.Event()

    def bump(self) -> None:
        super().bump()
        self.moved.set()


async def test_a_change_to_workflows_is_pushed_and_nothing_unheard_is_trusted(
    postgres: tuple[str, AsyncEngine],
) -> None:
    url, db = postgres
    changes = Moved()
    assert changes.value() is None  # no listener yet: each run reads its workflow's stamp
    listener = Notifications(url, lambda *_: None, lambda _emitter: None, changes)
    await _listening(listener)
    try:
        heard = changes.value()
        assert heard is not None
        changes.moved.clear()
        # Another process's commit; the trigger is per statement, so no row is needed.
        async with db.begin() as conn:
            await conn.execute(sa.text("UPDATE workflows SET name = name WHERE false"))
        await asyncio.wait_for(changes.moved.wait(), WAIT_S)
        assert changes.value() == heard + 1
    finally:
        await listener.close()
    assert changes.value() is None  # the listener gone: nothing is trusted again
