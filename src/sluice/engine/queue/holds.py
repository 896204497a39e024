"""What a job worker holds: its slots (and each account's share of them,
``domain/shares.py``), and the leases on the jobs it claimed.

**Slots.** Every run takes one of the worker's ``concurrency`` slots, after one of its
account's ``share`` slots (when there is a share): a job's run (``JobWorker``), and a run
without a job for a waiting client (``engine/runs/client_runs.py``). A run is counted against its
account from the moment it is handed over (``count``), not when it starts, so the worker sees
the account's count when it picks the next job.

**Leases.** ``lease_ms`` (30 s by default) is the promise: a job whose worker died or stalled
(kill -9, a lost machine, SIGSTOP) is taken over by another worker within it. So a claim, and
each renewal, holds the job for three quarters of it (``hold_ms``); the worker renews every
quarter (``beat``), so a job of any length keeps it; and the other workers look for passed
leases every eighth (``JobWorker``): a stall leaves at most 3/4 of the lease to run, plus 1/8
until someone looks. Jobs a worker
will not run (stopping, or their account at its share) are released: queued again at once,
their place in the queue unchanged, rather than after their leases.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable

from sluice import errors
from sluice.clock import Clock
from sluice.domain import shares
from sluice.storage import database, jobs
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


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
        self, writer: database.Writer, clock: Clock, worker_id: str, lease_ms: int
    ) -> None:
        self.writer = writer
        self.clock = clock
        self.worker_id = worker_id
        self.lease_ms = lease_ms
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

    async def beat(self, waiting: Callable[[], Iterable[Job]]) -> None:
        """Renew every quarter of a lease, until cancelled."""
        while True:
            await asyncio.sleep(self.lease_ms / 4000)
            try:
                await self.renew(waiting())
            except errors.NotReady as exc:  # a store outage, logged where it entered
                log.warning("could not renew the leases of the jobs in flight: %s", exc)
            except Exception:
                log.exception("could not renew the leases of the jobs in flight")

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
