"""The leases a job worker holds on the jobs it claimed.

A claim leases a job to one worker for ``lease_ms`` (30 s by default). While the worker holds
the job (running it, or claimed and waiting for a slot) it renews the lease every third of
that (``beat``), so a job of any length keeps it, and a job whose process died (kill -9, a
lost machine) is claimed again by another worker within one lease. Jobs a worker will not run
(stopping, or their account at its share) are released: queued again at once, their place in
the queue unchanged, rather than after their leases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from sluice.clock import Clock
from sluice.storage import database, jobs
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


class Leases:
    def __init__(
        self, writer: database.Writer, clock: Clock, worker_id: str, lease_ms: int
    ) -> None:
        self.writer = writer
        self.clock = clock
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        #: Jobs started by this worker and not ended.
        self.running: dict[int, Job] = {}

    def hold(self, job: Job) -> None:
        self.running[job.id] = job

    def drop(self, job_id: int) -> None:
        self.running.pop(job_id, None)

    async def renew(self, waiting: Iterable[int] = ()) -> int:
        """Extend the leases of the running jobs and of ``waiting`` (claimed, not started);
        the number renewed."""
        held = [*self.running, *waiting]
        if not held:
            return 0
        until = self.clock.now_ms() + self.lease_ms
        return await self.writer(
            lambda conn: jobs.renew_sync(conn, held, worker_id=self.worker_id, until_ms=until)
        )

    async def beat(self, waiting: Callable[[], Iterable[int]]) -> None:
        """Renew every third of a lease, until cancelled."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                await self.renew(waiting())
            except Exception:
                log.exception("could not renew the leases of the jobs in flight")

    async def release(self, job_ids: list[int]) -> None:
        """Queue again jobs this worker claimed and will not finish (never raises: a job left
        leased runs again after its lease)."""
        if not job_ids:
            return
        try:
            await self.writer(
                lambda conn: jobs.release_sync(conn, job_ids, worker_id=self.worker_id)
            )
        except Exception:
            log.exception("could not release %d jobs; they run after their leases", len(job_ids))
