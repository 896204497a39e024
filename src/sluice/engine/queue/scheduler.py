"""The scheduler: fires due timers as durable ``timer`` jobs (``handlers/timer.py`` runs them).

``tick`` is one pass: claim the timers due at the clock's now, batch after batch, each batch
one transaction that moves the timers forward and enqueues their jobs (storage/timers.py), so
any number of schedulers can share one PostgreSQL without firing a tick twice. The loop around
it sleeps until the earliest next tick (at most ``max_sleep_seconds``, so timers deployed by
another process are seen). Tests call ``tick`` with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import Clock
from sluice.storage import timers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchedulerConfig:
    #: Timers claimed per transaction.
    batch: int = 200
    #: The longest the loop sleeps between passes, seconds.
    max_sleep_seconds: float = 1.0


class Scheduler:
    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        config: SchedulerConfig | None = None,
        *,
        notify: Callable[[], None] | None = None,
    ) -> None:
        """``notify`` wakes the job worker when ticks are enqueued (else it finds them at its
        next poll)."""
        self.db = db
        self.clock = clock
        self.config = config or SchedulerConfig()
        self.on_enqueued = notify
        self._task: asyncio.Task[None] | None = None

    async def tick(self) -> int:
        """Fire every timer due now; the number of ticks enqueued."""
        total = 0
        while True:
            now_ms = self.clock.now_ms()
            async with self.db.begin() as conn:
                fired = await timers.claim_due(conn, now_ms=now_ms, limit=self.config.batch)
            total += len(fired)
            if fired:
                log.debug(
                    "%d timer ticks enqueued",
                    len(fired),
                    extra={"action": "timers_fired", "count": len(fired)},
                )
                if self.on_enqueued is not None:
                    self.on_enqueued()
            if len(fired) < self.config.batch:
                return total

    async def _sleep_seconds(self) -> float:
        async with self.db.connect() as conn:
            next_ms = await timers.next_due_ms(conn)
        longest = self.config.max_sleep_seconds
        if next_ms is None:
            return longest
        # At least a few ms: a due row another process holds locked must not make us spin.
        return min(longest, max(0.005, (next_ms - self.clock.now_ms()) / 1000))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        # No wake-up on deploy is needed: a new timer's first tick is an interval (or a cron
        # minute) away, and the sleep is at most max_sleep_seconds.
        while True:
            delay = self.config.max_sleep_seconds
            try:
                await self.tick()
                delay = await self._sleep_seconds()
            except Exception:
                log.exception("the scheduler failed to fire timers")
            await asyncio.sleep(delay)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
