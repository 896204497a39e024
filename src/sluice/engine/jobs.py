"""The job worker: claims durable jobs and runs their handlers.

A handler gets the job and a ``finish`` function to call *inside the transaction that stores
the job's results* (``Invoker.persist(..., also=finish)``), so "done" and the results commit
together: a completed job never runs again. A handler that returns without calling it has its
job marked done afterwards (nothing to store, e.g. its source was deleted). A handler that
raises (``errors.RunnerCrashed``, logged as a warning: the failure is Sluice's; or any other
exception) has its job queued again with backoff, until ``max_attempts``; a process that dies
mid-job leaves the lease to expire and the job to be claimed again. Tests drive it with
``run_once``/``drain`` and a fake clock.

Fair sharing: one account runs at most ``account_share`` jobs at once in a worker (its other
jobs stay queued, in order; ``domain/shares.py``), so the other slots stay free for other
accounts whatever one account queues. The share is per worker process, not counted in the
database: each process keeps slots free for other accounts on its own, at no cost per claim, and
nothing has to be corrected when a process dies with its count (docs/runtime.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.domain import shares
from sluice.storage import database, jobs
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)

#: Marks the job done; called with the connection of the transaction storing its results.
Finish = Callable[[Connection], None]
Handler = Callable[[Job, Finish], Awaitable[None]]


@dataclass(frozen=True)
class WorkerConfig:
    lease_ms: int = 360_000
    batch: int = 32
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
    #: While ``JobWorker.pressure()`` says the endpoints are saturated: one job at a time, and
    #: this pause after each (see the class docstring).
    pressed_pause_ms: float = 10.0
    #: Jobs of one account run at once, at most (``domain/shares.py``); 0, or ``concurrency``
    #: and more: no share.
    account_share: int = 0


#: Rows deleted per pruning transaction: short write locks on SQLite.
PRUNE_BATCH = 2000


def backoff_ms(attempts: int) -> int:
    """1 s, 2 s, 4 s … capped at 5 minutes."""
    return int(min(300, 2 ** max(0, attempts - 1)) * 1000)


class JobWorker:
    """Claims up to ``batch`` jobs at a time into a local queue and runs up to ``concurrency``
    of them at once, each its own task (a long job never holds back the ones after it).

    ``handlers`` is the table of job kinds this worker runs (built by ``platform.py``, one
    handler per kind: ``engine/handlers/``); it claims jobs of those kinds only.

    Requests first: ``pressure`` (from the platform: the ingress's group commits are large,
    so many requests are waiting to be stored) makes the background loop run one job at a
    time with a pause after each. In one process the endpoints and the runs share a core; under
    a burst the endpoints keep accepting at nearly full speed, every accepted request stored,
    and the runs go on at a reduced pace, then at full speed once the burst is over. Runs
    started by a request that waits for its answer (``run_now``) are never held back.
    """

    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        config: WorkerConfig | None = None,
        handlers: Mapping[str, Handler] | None = None,
        *,
        pressure: Callable[[], bool] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.config = config or WorkerConfig()
        self.worker_id = f"{os.getpid()}-{ids.random_token(6)}"
        # Claims and "done" marks: inline on SQLite, no per-statement thread hand-offs.
        self.writer = database.Writer(db)
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._pruned_at = clock.now_ms()
        self._expired_at: int | None = None
        #: Claimed, not started yet (their leases run).
        self._queue: collections.deque[Job] = collections.deque()
        #: Whether the endpoints are saturated (see the class docstring); None: never.
        self.pressure = pressure
        self._last_done = 0.0
        #: Jobs the loop runs at once now: ``concurrency``, or 1 under pressure.
        self._limit = self.config.concurrency
        self._share = shares.effective(self.config.account_share, self.config.concurrency)
        #: Jobs of each account running or waiting for a slot (counted before their task runs).
        self._busy: collections.Counter[str] = collections.Counter()
        #: The accounts skipped by the last claim when it found nothing, and when.
        self._missed: tuple[str, ...] | None = None
        self._missed_at = 0
        self._poll_ms = int(self.config.poll_seconds * 1000)
        #: Each busy account's slots (``account_share`` of them), when there is a share.
        self._gates: dict[str, asyncio.Semaphore] = {}

    async def prune(self) -> int:
        """Delete the done jobs past their retention; the number deleted."""
        self._pruned_at = self.clock.now_ms()
        if self.config.retention_ms <= 0:
            return 0
        before = self._pruned_at - self.config.retention_ms
        total = 0
        while True:
            deleted = await self.writer(
                lambda conn: jobs.prune_sync(conn, finished_before_ms=before, limit=PRUNE_BATCH)
            )
            total += deleted
            if deleted < PRUNE_BATCH:
                return total

    def notify(self) -> None:
        """A job was enqueued in this process: look now rather than at the next poll (when a
        slot is free; a job that ends wakes the loop anyway)."""
        self._missed = None  # the new job may be another account's
        if len(self._running) < self._limit:
            self._wake.set()

    async def _claim(self, limit: int) -> list[Job]:
        if not self.handlers:
            return []
        # The accounts at their share: their jobs stay queued (in order) until a slot frees.
        skip = tuple(sorted(shares.full(self._busy, self._share)))
        now_ms, kinds = self.clock.now_ms(), tuple(self.handlers)
        if skip and self._missed == skip and now_ms - self._missed_at < self._poll_ms:
            # The same claim found nothing a moment ago: it walks past every queued job of
            # those accounts, so it is not repeated until a job is enqueued here or a poll.
            return []
        expired = (
            self._expired_at is None or now_ms - self._expired_at >= self.config.expired_every_ms
        )
        if expired:
            self._expired_at = now_ms
        claimed = await self.writer(
            lambda conn: jobs.claim_sync(
                conn,
                worker_id=self.worker_id,
                now_ms=now_ms,
                lease_ms=self.config.lease_ms,
                limit=limit,
                kinds=kinds,
                expired=expired,
                skip_owners=skip,
            )
        )
        if skip:  # a claim without skipped accounts says nothing of the others' queue
            self._missed, self._missed_at = (None, 0) if claimed else (skip, now_ms)
        return claimed

    async def run_once(self) -> int:
        """Claim one batch of ready jobs and run them all; the number run."""
        claimed = await self._claim(self.config.batch)
        await asyncio.gather(*(self._run(job) for job in claimed))
        return len(claimed)

    async def drain(self) -> int:
        """Run until no job is ready now (tests, and shutdown)."""
        total = 0
        while count := await self.run_once():
            total += count
        return total

    async def run_now(self, job_id: int) -> bool:
        """Claim and run one job at once (an HTTP request that must answer from its run)."""
        for queued in self._queue:
            if queued.id == job_id:  # this worker claimed it already: run it now all the same
                self._queue.remove(queued)
                await self._run(queued)
                return True
        now_ms = self.clock.now_ms()
        job = await self.writer(
            lambda conn: jobs.claim_one_sync(
                conn, job_id, worker_id=self.worker_id, now_ms=now_ms, lease_ms=self.config.lease_ms
            )
        )
        if job is None:
            return False
        await self._run(job)
        return True

    def _run(self, job: Job) -> Coroutine[Any, Any, None]:
        """The job's run, counted against its account now (not when its task starts), so the
        loop sees the account's count when it picks the next job. Waits for one of the
        account's slots, then one of the worker's."""
        self._busy[job.owner_id] += 1
        gate = None
        if self._share:
            gate = self._gates.get(job.owner_id)
            if gate is None:
                gate = self._gates[job.owner_id] = asyncio.Semaphore(self._share)
        return self._run_counted(job, gate)

    async def _run_counted(self, job: Job, gate: asyncio.Semaphore | None) -> None:
        try:
            if gate is None:
                await self._execute(job)
            else:
                async with gate:
                    await self._execute(job)
        finally:
            self._busy[job.owner_id] -= 1
            if self._busy[job.owner_id] <= 0:
                del self._busy[job.owner_id]
                self._gates.pop(job.owner_id, None)

    async def _release(self, queued: list[Job]) -> None:
        """Queue again claimed jobs that will not start here now (their account is at its
        share): other workers may take them, and their leases do not run out in our hands."""
        ids = [job.id for job in queued]
        try:
            await self.writer(lambda conn: jobs.release_sync(conn, ids, worker_id=self.worker_id))
        except Exception:
            log.exception("could not release %d jobs; they run after their leases", len(ids))

    async def _execute(self, job: Job) -> None:
        handler = self.handlers[job.kind]
        finished = False

        def finish(conn: Connection) -> None:
            nonlocal finished
            finished = jobs.complete_sync(
                conn, job.id, worker_id=self.worker_id, now_ms=self.clock.now_ms()
            )

        async with self._slots:
            try:
                await handler(job, finish)
            except Exception as exc:  # any failure: retry with backoff, never lose the job
                retry = job.attempts < self.config.max_attempts
                level = logging.WARNING if isinstance(exc, errors.RunnerCrashed) else logging.ERROR
                log.log(
                    level,
                    "job %s (%s) failed, attempt %d: %s",
                    job.id,
                    job.kind,
                    job.attempts,
                    exc,
                    exc_info=not isinstance(exc, errors.RunnerCrashed),
                    extra={"action": "job_failed", "job_id": job.id},
                )
                now = self.clock.now_ms()
                async with self.db.begin() as conn:
                    await jobs.retry_or_fail(
                        conn,
                        job.id,
                        worker_id=self.worker_id,
                        now_ms=now,
                        error=str(exc),
                        retry_at_ms=now + backoff_ms(job.attempts) if retry else None,
                    )
                return
        if not finished:
            await self.writer(finish)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            pressed = self.pressure is not None and self.pressure()
            limit = self._limit = 1 if pressed else self.config.concurrency
            free = limit - len(self._running)
            if pressed and free > 0:
                pause = self.config.pressed_pause_ms / 1000 - (time.monotonic() - self._last_done)
                if pause > 0:
                    await asyncio.sleep(pause)
                    continue
            if free > 0 and not self._queue:
                # With shares, claim only what may start: the jobs of an account past its
                # share would go back to the queue at once (an UPDATE each).
                size = self.config.batch if not self._share else free
                try:
                    self._queue.extend(await self._claim(size))
                except Exception:
                    log.exception("the job worker failed to claim jobs")
            started = released = 0
            if free > 0 and self._queue:
                claimed = list(self._queue)
                owners = [job.owner_id for job in claimed]
                pick = shares.pick(owners, self._busy, free, self._share)
                started, released = len(pick.start), len(pick.release)
                self._queue = collections.deque(claimed[position] for position in pick.keep)
                if released:
                    await self._release([claimed[position] for position in pick.release])
                for position in pick.start:
                    task = asyncio.create_task(self._run(claimed[position]))
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
            # asyncio.timeout, not wait_for: no task per wait, and a cancel (stop()) that meets a
            # wake-up cannot leave the loop waiting on its inner task (seen on Python 3.11).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.poll_seconds):
                    await self._wake.wait()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._last_done = time.monotonic()
        self._wake.set()

    async def stop(self) -> None:
        """Stop claiming; jobs in flight are cancelled and, their leases left to expire, run
        again by the next worker (at-least-once)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for task in list(self._running):
            task.cancel()
        for task in list(self._running):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._queue:  # claimed, never started: queued again now, not after their leases
            unstarted = [job.id for job in self._queue]
            self._queue.clear()
            try:
                await self.writer(
                    lambda conn: jobs.release_sync(conn, unstarted, worker_id=self.worker_id)
                )
            except Exception:
                log.exception(
                    "could not release %d claimed jobs; they run after their leases", len(unstarted)
                )
        self.writer.dispose()
