"""The job worker: claims durable jobs and runs their handlers.

A handler gets the job and a ``finish`` function to call *inside the transaction that stores
the job's results* (``engine/state/commit.py``), so "done" and the results commit together: a
completed job never runs again. A handler that returns without calling it has its job marked
done afterwards (nothing to store). A handler that raises (``errors.RunnerCrashed``, logged as
a warning: the failure is Sluice's; or any other exception) has its job queued again with
backoff, until ``max_attempts``. Leases are short and renewed (**Leases**, below): a job whose
process died runs again within a lease. A worker that stalled past a lease stores nothing of
the jobs it lost (``finish`` raises ``errors.LeaseLost`` in the results' transaction: the
fencing token of ``storage/jobs.py``) and does not start the ones it had claimed and not
started. ``stop`` gives the jobs in flight a grace period, then queues again at once what it
did not finish. Tests drive it with ``run_once``/``drain``/``heartbeat`` and a fake clock.

One module for the worker and what it holds (``Slots``, ``Leases``, ``DueTimer``: before issue
28 they were two modules of their own, holds and due_timer, split off for size).

**Fair sharing.** One account runs at most ``account_share`` jobs at once in a worker (others
wait in order, ``domain/shares.py``), counted per process: nothing to correct when one dies.

**Slots.** Every run takes one of the worker's ``concurrency`` slots, after one of its
account's ``share`` slots (when there is a share): a job's run (``JobWorker``), and a run
without a job for a waiting client (``engine/runs/client_runs.py``). A run is counted against
its account from the moment it is handed over (``Slots.count``), not when it starts, so the
worker sees the account's count when it picks the next job.

**Leases.** ``lease_ms`` (30 s by default) is the promise: a job whose worker died or stalled
(kill -9, a lost machine, SIGSTOP) is taken over by another worker within it. So a claim, and
each renewal, holds the job for three quarters of it (``hold_ms``); the worker renews every
quarter (``Leases.beat``), so a job of any length keeps it; and the other workers look for
passed leases every eighth (``JobWorker``): a stall leaves at most 3/4 of the lease to run,
plus 1/8 until someone looks. That needs the stalled worker's transactions to end, or their row
locks would hide its jobs from every claim: PostgreSQL ends a session idle in a transaction
(``database.idle_tx_ms``), and the beat ends those stopped between a prepared statement and
its execution, which PostgreSQL does not (``Leases.end_stalled``). Jobs a worker will not run
(stopping, or their account at its share) are released: queued again at once, their place in
the queue unchanged, rather than after their leases.

**Due jobs.** Jobs with a run-after time (a ``$.flow.delay``/``rerun`` pause's ``resume`` job,
a retry's backoff) are ready at that time, and no enqueue wakes the worker then, so it keeps
one timer (``DueTimer``) armed at the earliest run-after time it knows of in the future, read
from the queue (``storage.jobs.next_due_sync``) when it goes idle after being told of new jobs
(``DueTimer.mark``) or once a poll interval passed since the last look. The timer wakes the
worker at that time, on the worker's ``Clock`` (a fake clock in tests: moving it past the time
fires the timer). Polling stays the fallback for jobs enqueued by processes that do not notify.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import math
import os
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.domain import shares
from sluice.domain.admission import Pace
from sluice.domain.states import JobKind
from sluice.storage import database, jobs
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)

#: Marks the job done; called with the connection of the transaction storing its results.
Finish = Callable[[Connection], None]
Handler = Callable[[Job, Finish], Awaitable[None]]
#: The batch path's done marks: marks the jobs at these positions of the batch done in one
#: statement, in the transaction storing their results; the positions whose claims were still
#: current (the others were taken over: their results must not commit).
FinishMany = Callable[[Connection, Sequence[int]], set[int]]


@runtime_checkable
class BatchHandler(Protocol):
    """A handler that can also run many jobs of one target at once (the batch path: a
    source's queued requests, ``handlers/http.py``)."""

    async def __call__(self, job: Job, finish: Finish) -> None: ...

    async def run_batch(
        self, batch: Sequence[tuple[Job, Finish]], finish_many: FinishMany
    ) -> list[Exception | None]:
        """Run the jobs (of one kind and target, in claim order), each with its ``finish``
        (or all of them with ``finish_many``, one statement); for each, None (done: its
        results stored with its done mark, or nothing to store) or the exception that fails
        it alone (``errors.LeaseLost``: fenced). Raising fails them all (each queued again
        with backoff)."""
        ...


#: Handler classes and whether they run batches (``runs_batches``).
_BATCHING: dict[type, bool] = {}


def runs_batches(handler: object) -> TypeGuard[BatchHandler]:
    """Whether ``handler`` runs batches (a ``BatchHandler``), remembered per class:
    ``isinstance`` against a runtime-checkable Protocol looks up each of its members on every
    call (~3.7 µs; made for every claimed job, ~5% of a draining worker's samples)."""
    cls = type(handler)
    known = _BATCHING.get(cls)
    if known is None:
        known = _BATCHING[cls] = issubclass(cls, BatchHandler)
    return known


@dataclass(frozen=True)
class WorkerConfig:
    #: A job whose worker died or stalled is taken over within this (``Leases``).
    lease_ms: int = 30_000
    #: Jobs a claim takes, at most. A batch's round trips to the database (its claim, its
    #: source's read, its commit) are paid once for all its runs (bench/README.md, "Third
    #: round: a batch's statements, and batches of 64").
    batch: int = 64
    concurrency: int = 8
    poll_seconds: float = 1.0
    max_attempts: int = 5
    #: Done jobs are deleted this long after they finished (their results are stored as
    #: events and runs); 0 keeps them. Failed jobs are kept.
    retention_ms: int = 3_600_000
    #: How often the worker prunes, at most.
    prune_every_ms: int = 60_000
    #: How often a claim also looks for jobs whose lease passed (their worker died), at most.
    expired_every_ms: int = 5_000
    #: While ``JobWorker.pace()`` says requests first: one unit at a time, and this pause
    #: after each (see the class docstring).
    pressed_pause_ms: float = 10.0
    #: Jobs of one account run at once, at most (``domain/shares.py``); 0, or ``concurrency``
    #: and more: no share. A batch (below) counts as one.
    account_share: int = 0
    #: The batch path: claimed jobs of one kind and target whose handler runs batches
    #: (``BatchHandler``) run together, up to this many, in one slot; 1: one at a time.
    run_batch: int = 64
    #: PostgreSQL: a session that has waited this long for its client in the middle of a
    #: statement is ended (``Leases.end_stalled``); None: ``database.idle_tx_ms`` of the lease.
    stalled_session_ms: int | None = None


async def _cancel(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def backoff_ms(attempts: int) -> int:
    """1 s, 2 s, 4 s … capped at 5 minutes."""
    return int(min(300, 2 ** max(0, attempts - 1)) * 1000)


class RanNow(enum.Enum):
    """What ``JobWorker.run_now`` did with a job a waiting request needs run at once."""

    #: Not claimed here: another worker (of this process or another) has it; its run settles.
    ELSEWHERE = "elsewhere"
    #: Run here, its results and done mark stored.
    DONE = "done"
    #: Run (or due to run) here, but not finished: its handler failed and it was queued again
    #: with backoff, or its lease passed (another worker may run it). It runs again.
    AGAIN = "again"


# ---- slots and leases: what a worker holds --------------------------------------------


class Slots:
    def __init__(self, concurrency: int, account_share: int) -> None:
        self.share = shares.effective(account_share, concurrency)
        self._slots = asyncio.Semaphore(concurrency)
        #: Runs of each account counted and not ended (running or waiting for a slot).
        self.busy: collections.Counter[str] = collections.Counter()
        #: Each busy account's slots (``share`` of them), when there is a share.
        self._gates: dict[str, asyncio.Semaphore] = {}

    def count(self, owner_id: str) -> asyncio.Semaphore | None:
        """Count one more run of the account; its gate (its share of the slots), if any."""
        self.busy[owner_id] += 1
        if not self.share:
            return None
        gate = self._gates.get(owner_id)
        if gate is None:
            gate = self._gates[owner_id] = asyncio.Semaphore(self.share)
        return gate

    def uncount(self, owner_id: str) -> None:
        self.busy[owner_id] -= 1
        if self.busy[owner_id] <= 0:
            del self.busy[owner_id]
            self._gates.pop(owner_id, None)

    def full(self) -> tuple[str, ...]:
        """The accounts at their share (a claim leaves their jobs queued)."""
        return tuple(sorted(shares.full(self.busy, self.share)))

    def worker_slot(self) -> asyncio.Semaphore:
        """One of the worker's slots (after the account's gate, for a counted run)."""
        return self._slots

    @contextlib.asynccontextmanager
    async def slot(self, owner_id: str) -> AsyncIterator[None]:
        """A run counted, then holding its account's slot and one of the worker's."""
        gate = self.count(owner_id)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if gate is not None:
                    await stack.enter_async_context(gate)
                await stack.enter_async_context(self._slots)
                yield
        finally:
            self.uncount(owner_id)


class Leases:
    """The leases of the jobs a worker holds, and how long each is known to hold.

    Each held job has a local deadline: the time of the claim or of its last renewal that the
    database confirmed, plus the lease. Past it, another worker may have taken the job over
    (this process stalled: a SIGSTOP, a VM pause, a long GC), so a claimed job not started yet
    is not started (``lapsed``), and a running one's results are refused when they commit
    (the fencing token, ``storage/jobs.py``). Times come from the worker's clock, which in
    production never steps (``clock.SystemClock``)."""

    def __init__(
        self,
        writer: database.Writer,
        clock: Clock,
        worker_id: str,
        lease_ms: int,
        *,
        db: AsyncEngine | None = None,
        stalled_session_ms: int | None = None,
    ) -> None:
        self.writer = writer
        self.clock = clock
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        #: PostgreSQL: the engine on which ``end_stalled`` looks (None: it does not).
        self.db = db if db is not None and database.is_postgres(db) else None
        self.stalled_session_ms = (
            database.idle_tx_ms(lease_ms) if stalled_session_ms is None else stalled_session_ms
        )
        #: How long a claim or a renewal holds a job (see the module docstring).
        self.hold_ms = lease_ms * 3 // 4
        #: Jobs started by this worker and not ended.
        self.running: dict[int, Job] = {}
        #: Each held job's local deadline (see the class docstring), by job id.
        self._until: dict[int, int] = {}

    def claimed(self, held: Iterable[Job], at_ms: int) -> None:
        """Jobs claimed at ``at_ms`` (their leases run from then)."""
        for job in held:
            self._until[job.id] = at_ms + self.hold_ms

    def hold(self, job: Job) -> None:
        self.running[job.id] = job
        self._until.setdefault(job.id, self.clock.now_ms() + self.hold_ms)

    def drop(self, job_id: int) -> None:
        self.running.pop(job_id, None)
        self._until.pop(job_id, None)

    def lapsed(self, job: Job) -> bool:
        """Whether the job's lease may have passed: another worker may run it now. A tenth of
        the lease early, for the clocks of other hosts that run a little ahead."""
        until = self._until.get(job.id)
        return until is not None and self.clock.now_ms() >= until - self.lease_ms // 10

    async def renew(self, waiting: Iterable[Job] = ()) -> int:
        """Extend the leases of the running jobs and of ``waiting`` (claimed, not started);
        the number renewed."""
        held = [*self.running.values(), *waiting]
        if not held:
            return 0
        now_ms = self.clock.now_ms()
        until = now_ms + self.hold_ms
        renewed = await self.writer(lambda conn: jobs.renew_sync(conn, held, until_ms=until))
        for job_id in renewed:
            if job_id in self._until:
                self._until[job_id] = until
        return len(renewed)

    async def end_stalled(self) -> list[int]:
        """PostgreSQL: end the sessions stopped in the middle of a statement for longer than
        ``stalled_session_ms`` (``database.end_stalled_sessions``), any process's. PostgreSQL
        ends a session left idle in a transaction itself (``database.idle_tx_ms``), but not one
        between a prepared statement and its execution: a worker stopped there would keep its
        jobs' rows locked, hidden from every claim, for as long as it is stopped. Ended, they
        are taken over within the lease as any stalled worker's."""
        if self.db is None:
            return []
        return await database.end_stalled_sessions(self.db, older_than_ms=self.stalled_session_ms)

    async def beat(self, waiting: Callable[[], Iterable[Job]]) -> None:
        """Renew every quarter of a lease, and end stalled sessions, until cancelled."""
        while True:
            await asyncio.sleep(self.lease_ms / 4000)
            try:
                await self.renew(waiting())
            except errors.NotReady as exc:  # a store outage, logged where it entered
                log.warning("could not renew the leases of the jobs in flight: %s", exc)
            except Exception:
                log.exception("could not renew the leases of the jobs in flight")
            try:
                await self.end_stalled()
            except errors.NotReady as exc:
                log.warning("could not look for stalled database sessions: %s", exc)
            except Exception:
                log.exception("could not look for stalled database sessions")

    async def release(self, held: list[Job]) -> None:
        """Queue again jobs this worker claimed and will not finish (never raises: a job left
        leased runs again after its lease). A job taken over meanwhile is left alone."""
        for job in held:
            self._until.pop(job.id, None)
        if not held:
            return
        try:
            await self.writer(lambda conn: jobs.release_sync(conn, held))
        except Exception:
            log.exception("could not release %d jobs; they run after their leases", len(held))


# ---- the due timer: the worker woken when a queued job becomes due -------------------


class DueTimer:
    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        kinds: Collection[JobKind],
        wake: Callable[[], None],
        recheck_ms: int,
    ) -> None:
        # Inline on SQLite (no thread hand-offs: it is read each time the loop idles).
        self.reader = database.Reader(db)
        self.clock = clock
        #: The job kinds the worker runs (its handler table: read at each look).
        self.kinds = kinds
        self._wake = wake
        #: Looked at again after this long even unmarked (jobs enqueued by other processes).
        self.recheck_ms = recheck_ms
        self._stale = True
        self._looked_ms = 0
        #: The time the timer is armed for, and its task.
        self.armed_ms: int | None = None
        self._task: asyncio.Task[None] | None = None

    def mark(self) -> None:
        """Jobs were enqueued (or a poll passed): read the next due time before idling."""
        self._stale = True

    async def refresh(self) -> None:
        """Arm the timer from the queue, if it may have changed since the last look."""
        now_ms = self.clock.now_ms()
        if not self._stale and now_ms - self._looked_ms < self.recheck_ms:
            return
        self._stale, self._looked_ms = False, now_ms
        kinds = tuple(self.kinds)
        try:
            due = await self.reader(
                lambda sync: jobs.next_due_sync(sync, now_ms=now_ms, kinds=kinds)
            )
        except Exception:
            log.exception("could not read when the next job is due; polling instead")
            return
        if due is not None:
            self.arm(due)

    def arm(self, due_ms: int) -> None:
        """Wake the worker at ``due_ms``, unless the timer is armed for that time or earlier."""
        if self.armed_ms is not None and self.armed_ms <= due_ms and self._task is not None:
            return
        if self._task is not None:
            self._task.cancel()
        self.armed_ms = due_ms
        self._task = asyncio.create_task(self._fire(due_ms))

    async def _fire(self, due_ms: int) -> None:
        await self.clock.sleep_until(due_ms)
        self.armed_ms, self._task = None, None
        # The job that was due is claimed now; the one after it is read when the loop idles.
        self._stale = True
        self._wake()

    async def close(self) -> None:
        task, self._task, self.armed_ms = self._task, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.reader.dispose()


# ---- the worker ---------------------------------------------------------------------


class JobWorker:
    """Claims up to ``batch`` jobs at a time into a local queue and runs up to ``concurrency``
    of them at once, each its own task (a long job never holds back the ones after it).

    ``handlers`` is the table of job kinds this worker runs (built by ``platform/assembly.py``, one
    handler per kind: ``engine/handlers/``); it claims jobs of those kinds only.

    Requests first: ``pace`` (from the platform: ``domain.admission.Pace``, from whether the
    ingress's group commits are large and how long the backlog waits) makes the background loop
    run one unit at a time, with a pause after each (``REQUESTS_FIRST``: under a burst the
    endpoints keep accepting at nearly full speed) or back to back (``KEEP_UP``: the runs keep
    pace with a sustained load), or every slot (``FULL``); runs for a waiting client
    (``run_now``) are never held back.
    """

    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        config: WorkerConfig | None = None,
        handlers: Mapping[JobKind, Handler] | None = None,
        *,
        pace: Callable[[], Pace] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.config = config or WorkerConfig()
        self.worker_id = f"{os.getpid()}-{ids.random_token(6)}"
        # Claims and "done" marks: inline on SQLite, no per-statement thread hand-offs.
        self.writer = database.Writer(db)
        self.handlers: dict[JobKind, Handler] = dict(handlers or {})
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[bool]] = set()
        #: The worker's slots and each account's share of them (``Leases``).
        self.slots = Slots(self.config.concurrency, self.config.account_share)
        self._pruned_at = clock.now_ms()
        self._expired_at: int | None = None
        #: Claimed, not started yet (their leases run).
        self._queue: collections.deque[Job] = collections.deque()
        #: The pace to run at (see the class docstring); None: always ``FULL``.
        self.pace = pace
        #: When the last unit ended (``time.monotonic()``); none has yet: no pause is owed.
        #: (Not 0.0: the monotonic clock counts from boot, so a machine up for less than the
        #: pause would hold the first unit back.)
        self._last_done = -math.inf
        #: Units the loop runs at once now: ``concurrency``, or 1 at a requests-first pace.
        self._limit = self.config.concurrency
        #: The accounts skipped by the last claim when it found nothing, and when.
        self._missed: tuple[str, ...] | None = None
        self._missed_at = 0
        self._poll_ms = int(self.config.poll_seconds * 1000)
        self.due = DueTimer(db, clock, self.handlers.keys(), self._wake.set, self._poll_ms)
        #: The leases of the jobs this worker holds (``Leases``).
        self.leases = Leases(
            self.writer,
            clock,
            self.worker_id,
            self.config.lease_ms,
            db=db,
            stalled_session_ms=self.config.stalled_session_ms,
        )
        #: Jobs cancelled by ``stop`` before they ended: queued again at once.
        self._interrupted: list[Job] = []
        self._beat: asyncio.Task[None] | None = None
        #: Set by ``hurry()`` (a second SIGTERM): ``stop`` waits no longer.
        self._hurry = asyncio.Event()

    async def prune(self) -> int:
        """Delete the done jobs past their retention; the number deleted."""
        self._pruned_at = self.clock.now_ms()
        if self.config.retention_ms <= 0:
            return 0
        before = self._pruned_at - self.config.retention_ms
        return await jobs.prune_done(self.writer, finished_before_ms=before)

    def notify(self, owner_id: str | None = None, *, due_now: bool = False) -> None:
        """A job (of ``owner_id``, when known; ``due_now``: no timer to arm for it) was enqueued
        here: look now, not at the next poll (if a slot is free; a job's end wakes it too)."""
        if owner_id is None or self._missed is None or owner_id not in self._missed:
            # The new job may be another account's: the claim that found nothing may not now.
            # (A job of an account at its share changes nothing: under one account's burst,
            # each request would otherwise make a claim that walks past its queued jobs.)
            self._missed = None
        if not due_now:  # it may be due later: the timer is armed for it when the loop idles
            self.due.mark()
        if len(self._running) < self._limit:
            self._wake.set()

    async def _claim(self, limit: int) -> list[Job]:
        if not self.handlers:
            return []
        # The accounts at their share: their jobs stay queued (in order) until a slot frees.
        skip = self.slots.full()
        now_ms, kinds = self.clock.now_ms(), tuple(self.handlers)
        if skip and self._missed == skip and now_ms - self._missed_at < self._poll_ms:
            # The same claim found nothing a moment ago: it walks past every queued job of
            # those accounts, so it is not repeated until a job is enqueued here or a poll.
            return []
        # Every eighth of a lease at least: a stalled worker's jobs are taken over within one.
        every = min(self.config.expired_every_ms, self.config.lease_ms // 8)
        expired = self._expired_at is None or now_ms - self._expired_at >= every
        if expired:
            self._expired_at = now_ms
        claimed = await self.writer(
            lambda conn: jobs.claim_sync(
                conn,
                worker_id=self.worker_id,
                now_ms=now_ms,
                lease_ms=self.leases.hold_ms,
                limit=limit,
                kinds=kinds,
                expired=expired,
                skip_owners=skip,
            )
        )
        if skip:  # a claim without skipped accounts says nothing of the others' queue
            self._missed, self._missed_at = (None, 0) if claimed else (skip, now_ms)
        self.leases.claimed(claimed, now_ms)
        return claimed

    async def run_once(self) -> int:
        """Claim one batch of ready jobs and run them all; the number run."""
        claimed = await self._claim(self.config.batch)
        units = self._units(claimed)
        await asyncio.gather(*(self._run_unit([claimed[p] for p in unit]) for unit in units))
        return len(claimed)

    async def drain(self) -> int:
        """Run until no job is ready now (tests, and shutdown)."""
        total = 0
        while count := await self.run_once():
            total += count
        return total

    async def run_now(self, job_id: int) -> RanNow:
        """Claim and run one job at once (an HTTP request that must answer from its run)."""
        for queued in self._queue:
            if queued.id == job_id:  # this worker claimed it already: run it now all the same
                self._queue.remove(queued)
                return RanNow.DONE if await self._run(queued) else RanNow.AGAIN
        now_ms = self.clock.now_ms()
        job = await self.writer(
            lambda conn: jobs.claim_one_sync(
                conn, job_id, worker_id=self.worker_id, now_ms=now_ms, lease_ms=self.leases.hold_ms
            )
        )
        if job is None:
            return RanNow.ELSEWHERE
        self.leases.claimed([job], now_ms)
        return RanNow.DONE if await self._run(job) else RanNow.AGAIN

    def _run(self, job: Job) -> Coroutine[Any, Any, bool]:
        return self._run_unit([job])

    def _run_unit(self, unit: list[Job]) -> Coroutine[Any, Any, bool]:
        """The run of a job, or of a batch of jobs of one target (``_units``), counted against
        its account now (not when its task starts), so the loop sees the account's count when
        it picks the next one. Waits for one of the account's slots, then one of the
        worker's: a batch takes one of each. Whether every job of the unit finished (its
        results and done mark stored)."""
        for job in unit:
            self.leases.hold(job)
        return self._run_counted(unit, self.slots.count(unit[0].owner_id))

    async def _run_counted(self, unit: list[Job], gate: asyncio.Semaphore | None) -> bool:
        try:
            if gate is None:
                return await self._execute_unit(unit)
            async with gate:
                return await self._execute_unit(unit)
        finally:
            for job in unit:
                self.leases.drop(job.id)
            self.slots.uncount(unit[0].owner_id)

    def _execute_unit(self, unit: list[Job]) -> Coroutine[Any, Any, bool]:
        handler = self.handlers[unit[0].kind]
        if len(unit) > 1 and runs_batches(handler):
            return self._execute_batch(unit, handler)
        return self._execute(unit[0])

    def _unit_size(self) -> int:
        """The most jobs a unit holds: ``run_batch`` when a handler runs batches, else 1."""
        batching = any(runs_batches(h) for h in self.handlers.values())
        return max(1, self.config.run_batch) if batching else 1

    def _units(self, claimed: Sequence[Job]) -> list[list[int]]:
        """The claimed jobs (positions) as units that run in one slot each: jobs of one kind
        and target whose handler runs batches, in claim order, up to ``run_batch`` a unit;
        every other job alone. Units are in the order of their first job."""
        size = self.config.run_batch
        units: list[list[int]] = []
        open_units: dict[tuple[JobKind, str], list[int]] = {}
        for position, job in enumerate(claimed):
            if size > 1 and runs_batches(self.handlers.get(job.kind)):
                key = (job.kind, job.target_id)
                unit = open_units.get(key)
                if unit is not None and len(unit) < size:
                    unit.append(position)
                    continue
                unit = open_units[key] = [position]
                units.append(unit)
            else:
                units.append([position])
        return units

    async def _execute_batch(self, unit: list[Job], handler: BatchHandler) -> bool:
        """The batch path: one handler call for the jobs of one target. Each job keeps its
        own fate: fenced, done, or failed (queued again with backoff) alone. Whether all
        finished."""
        finished: set[int] = set()

        def finisher(job: Job) -> Finish:
            def finish(conn: Connection) -> None:
                if not jobs.complete_sync(conn, job, now_ms=self.clock.now_ms()):
                    # Another worker holds the job now: its results must not commit.
                    raise errors.LeaseLost(details={"job_id": job.id})
                finished.add(job.id)

            return finish

        def finish_many(conn: Connection, positions: Sequence[int]) -> set[int]:
            chosen = [live[position] for position in positions]
            done = jobs.complete_many_sync(conn, chosen, now_ms=self.clock.now_ms())
            finished.update(done)
            return {position for position in positions if live[position].id in done}

        async with self.slots.worker_slot():
            lapsed = [job for job in unit if self.leases.lapsed(job)]
            for job in lapsed:
                self._lost(job, "before it started")
            if lapsed:
                await self.leases.release(lapsed)
            live = [job for job in unit if job not in lapsed]
            if not live:
                return False
            try:
                answers = await handler.run_batch(
                    [(job, finisher(job)) for job in live], finish_many
                )
            except asyncio.CancelledError:
                self._interrupted.extend(job for job in live if job.id not in finished)
                raise
            except Exception as exc:  # any failure: each job retried with backoff
                answers = [exc] * len(live)
        unfinished: list[Job] = []
        for job, answer in zip(live, answers, strict=True):
            if isinstance(answer, errors.LeaseLost):
                self._lost(job, "its results were not stored")
            elif answer is not None:
                await self.failed(job, answer)
            elif job.id not in finished:
                unfinished.append(job)
        if unfinished:  # nothing to store: done now, each only while its claim is current
            now_ms = self.clock.now_ms()
            done = await self.writer(
                lambda conn: [jobs.complete_sync(conn, job, now_ms=now_ms) for job in unfinished]
            )
            for job, held in zip(unfinished, done, strict=True):
                if held:
                    finished.add(job.id)
                else:
                    self._lost(job, "its results were not stored")
        return not lapsed and all(job.id in finished for job in live)

    def slot(self, owner_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A run without a job (``engine/runs/client_runs.py``) takes a slot as a job would: its
        account's share first, then one of the worker's."""
        return self.slots.slot(owner_id)

    async def _execute(self, job: Job) -> bool:
        """Run one job; whether it finished (its results and done mark stored)."""
        handler = self.handlers[job.kind]
        finished = False

        def finish(conn: Connection) -> None:
            nonlocal finished
            if not jobs.complete_sync(conn, job, now_ms=self.clock.now_ms()):
                # Another worker holds the job now: this transaction's results must not commit.
                raise errors.LeaseLost(details={"job_id": job.id})
            finished = True

        async with self.slots.worker_slot():
            if self.leases.lapsed(job):
                # Claimed before a stall longer than its lease: another worker may run it now.
                self._lost(job, "before it started")
                await self.leases.release([job])
                return False
            try:
                await handler(job, finish)
            except asyncio.CancelledError:
                if not finished:
                    self._interrupted.append(job)
                raise
            except errors.LeaseLost:
                self._lost(job, "its results were not stored")
                return False
            except Exception as exc:  # any failure: retry with backoff, never lose the job
                await self.failed(job, exc)
                return False
        if not finished:
            try:
                await self.writer(finish)
            except errors.LeaseLost:
                self._lost(job, "its results were not stored")
        return finished

    @staticmethod
    def _lost(job: Job, what: str) -> None:
        log.warning(
            "job %s (%s): its lease passed and another worker may hold it; %s",
            job.id,
            job.kind,
            what,
            extra={"action": "lease_lost", "job_id": job.id},
        )

    async def failed(self, job: Job, exc: Exception) -> None:
        """The job's run failed: queued again with backoff until ``max_attempts``, then failed
        (kept, with the error). A store that was unavailable (a full disk, PostgreSQL down)
        is no fault of the job: it is queued again whatever its attempts, and logged without
        a stack, as a runner crash is; if its retry cannot be stored either, its lease ends
        and another claim runs it."""
        outage = isinstance(exc, errors.NotReady)
        retry = outage or job.attempts < self.config.max_attempts
        expected = outage or isinstance(exc, errors.RunnerCrashed)
        log.log(
            logging.WARNING if expected else logging.ERROR,
            "job %s (%s) failed, attempt %d: %s",
            job.id,
            job.kind,
            job.attempts,
            exc,
            exc_info=not expected,
            extra={"action": "job_failed", "job_id": job.id},
        )
        now = self.clock.now_ms()
        try:
            async with self.db.begin() as conn:
                held = await jobs.retry_or_fail(
                    conn,
                    job,
                    now_ms=now,
                    error=str(exc),
                    retry_at_ms=now + backoff_ms(job.attempts) if retry else None,
                )
        except errors.NotReady as again:
            log.warning(
                "job %s (%s): its retry was not stored (%s); it runs again after its lease",
                job.id,
                job.kind,
                again,
                extra={"action": "job_retry_unstored", "job_id": job.id},
            )
            return
        if not held:
            self._lost(job, "its failure was not recorded")
        self.due.mark()  # the retry is due after its backoff: arm the timer for it

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())
        self._beat = asyncio.create_task(self.leases.beat(self._waiting))

    def _waiting(self) -> list[Job]:
        return list(self._queue)

    async def heartbeat(self) -> int:
        """What the lease beat does once: renew the leases of the jobs this worker holds
        (running, or claimed and waiting), and end stalled database sessions
        (``Leases.end_stalled``); the number renewed."""
        renewed = await self.leases.renew(self._waiting())
        await self.leases.end_stalled()
        return renewed

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            pace = Pace.FULL if self.pace is None else self.pace()
            limit = self._limit = self.config.concurrency if pace is Pace.FULL else 1
            free = limit - len(self._running)
            if pace is Pace.REQUESTS_FIRST and free > 0:
                pause = self.config.pressed_pause_ms / 1000 - (time.monotonic() - self._last_done)
                if pause > 0:
                    await asyncio.sleep(pause)
                    continue
            full = self.slots.full()
            if free > 0 and all(job.owner_id in full for job in self._queue):
                # Nothing here may start. With shares, claim only what may (held jobs aside):
                # ``free`` units, each up to a batch when some kind runs batches.
                size = self.config.batch
                if self.slots.share:
                    size = min(size, free * self._unit_size())
                try:
                    self._queue.extend(await self._claim(size))
                except errors.NotReady as exc:  # logged once where it entered (storage)
                    log.debug("the job worker could not claim jobs: %s", exc)
                except Exception:
                    log.exception("the job worker failed to claim jobs")
            started = released = 0
            if free > 0 and self._queue:
                claimed = list(self._queue)
                # The batch path: a target's jobs in one unit (one slot, one share).
                units = self._units(claimed)
                owners = [claimed[unit[0]].owner_id for unit in units]
                share = self.slots.share
                pick = shares.pick(owners, self.slots.busy, free, share, hold=share)
                started, released = len(pick.start), len(pick.release)
                self._queue = collections.deque(
                    claimed[position] for u in pick.keep for position in units[u]
                )
                if released:
                    await self.leases.release(
                        [claimed[position] for u in pick.release for position in units[u]]
                    )
                for u in pick.start:
                    task = asyncio.create_task(self._run_unit([claimed[p] for p in units[u]]))
                    self._running.add(task)
                    task.add_done_callback(self._done)
            if self.clock.now_ms() - self._pruned_at >= self.config.prune_every_ms:
                try:
                    await self.prune()
                except Exception:
                    log.exception("the job worker failed to prune done jobs")
            # Slots left: claim again (jobs released just now are skipped by that claim).
            if (started or released) and len(self._running) < limit:
                continue
            await self.due.refresh()  # wakes the loop when the next queued job becomes due
            # asyncio.timeout: a cancel meeting a wake-up cannot leave the loop waiting (3.11).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.poll_seconds):
                    await self._wake.wait()

    def _done(self, task: asyncio.Task[bool]) -> None:
        self._running.discard(task)
        self._last_done = time.monotonic()
        self._wake.set()

    def hurry(self) -> None:
        """Stop waiting for the jobs in flight (a second SIGTERM during ``stop``)."""
        self._hurry.set()

    async def stop(self, grace_seconds: float = 0.0) -> None:
        """Stop claiming. Jobs in flight get ``grace_seconds`` to finish (their leases still
        renewed; ``hurry()`` ends the wait); those still running then are cancelled. Every job
        this worker claimed and did not finish is queued again at once, not after its lease,
        to run on the next worker (at least once)."""
        await _cancel(self._task)
        self._task = None
        await self.due.close()
        # Claimed, never started: queued again now, for other workers.
        await self.leases.release(list(self._queue))
        self._queue.clear()
        await self._wait_for_running(grace_seconds)
        for task in list(self._running):
            await _cancel(task)
        await _cancel(self._beat)
        self._beat = None
        interrupted, self._interrupted = self._interrupted, []
        await self.leases.release(interrupted)
        self.writer.dispose()

    async def _wait_for_running(self, grace_seconds: float) -> None:
        if not self._running or grace_seconds <= 0:
            return
        log.info(
            "stopping: waiting up to %g s for %d jobs in flight",
            grace_seconds,
            len(self._running),
            extra={"action": "worker_stopping"},
        )
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            async with asyncio.timeout(grace_seconds):
                while self._running and not self._hurry.is_set():
                    await asyncio.wait({*self._running, hurry}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            pass
        finally:
            hurry.cancel()
