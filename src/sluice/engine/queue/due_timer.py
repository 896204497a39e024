"""Waking the job worker when a job becomes due, rather than at its next poll.

Jobs with a run-after time (a ``$.flow.delay``/``rerun`` pause's ``resume`` job, a retry's
backoff) are ready at that time, and no enqueue wakes the worker then. The worker keeps one
timer armed at the earliest run-after time it knows of in the future, read from the queue
(``storage.jobs.next_due_sync``) when it goes idle after being told of new jobs (``mark``) or
once a poll interval passed since the last look. The timer wakes the worker at that time, on
the worker's ``Clock`` (a fake clock in tests: moving it past the time fires the timer).
Polling stays the fallback for jobs enqueued by processes that do not notify.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import Clock
from sluice.storage import database, jobs

log = logging.getLogger(__name__)


class DueTimer:
    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        kinds: Collection[str],
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
