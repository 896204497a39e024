"""Time, behind a small port so tests move a fake clock instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


def iso_ms(ms: int) -> str:
    """``2020-11-26T06:06:56.077Z``: ISO 8601 UTC with milliseconds, as Pipedream's errors."""
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time, epoch milliseconds."""
        ...

    async def sleep_until(self, epoch_ms: int) -> None:
        """Return once ``now_ms()`` has reached ``epoch_ms`` (at once if it has)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_until(self, epoch_ms: int) -> None:
        # Monotonic sleep: a wall clock set back meanwhile makes it return early, and callers
        # look at the time again (the job worker's timer re-reads the queue).
        await asyncio.sleep(max(0, epoch_ms - self.now_ms()) / 1000)


class FakeClock:
    """A clock that moves only when told: ``clock.advance(seconds=15)``. ``sleep_until``
    returns when the clock is moved past its time, however little real time passed."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        #: Pending ``sleep_until`` calls: (their time, the future they wait on).
        self._sleepers: list[tuple[int, asyncio.Future[None]]] = []
        self._slept: asyncio.Event | None = None

    def now_ms(self) -> int:
        return self._now

    def advance(self, *, seconds: float = 0, ms: int = 0) -> None:
        self.set(self._now + int(seconds * 1000) + ms)

    def set(self, epoch_ms: int) -> None:
        self._now = epoch_ms
        for at, future in self._sleepers:
            if at <= epoch_ms and not future.done():
                future.set_result(None)

    async def sleep_until(self, epoch_ms: int) -> None:
        if epoch_ms <= self._now:
            return
        entry = (epoch_ms, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        if self._slept is not None:
            self._slept.set()
        try:
            await entry[1]
        finally:
            self._sleepers.remove(entry)

    def sleeping_until(self) -> list[int]:
        """The times pending ``sleep_until`` calls wait for, earliest first."""
        return sorted(at for at, future in self._sleepers if not future.done())

    async def until_sleeping(self, epoch_ms: int) -> None:
        """Wait until something sleeps until ``epoch_ms`` (a test moves the clock only once
        the sleeper it is about is armed)."""
        while epoch_ms not in self.sleeping_until():
            self._slept = asyncio.Event()
            await self._slept.wait()
