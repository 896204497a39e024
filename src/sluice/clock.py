"""Time, behind a small port so tests move a fake clock instead of sleeping.

Sluice's time never steps. Leases, ``$.flow`` delays, retries and timer ticks are all due at
a time read from the clock, so a wall clock set forward by two minutes (an NTP step, a VM
restored, an operator) would end every lease and delay at once, and one set back would hold
every tick. ``SystemClock`` therefore counts elapsed time on the kernel's boot-time clock
(monotonic, counting suspend) and follows the wall clock only by slewing towards it, at most
5% faster or slower than real time (``steady``): a step of two minutes is absorbed in 40
minutes, during which a 30 s lease or delay is off by 1.5 s at most. A difference of more than
10 minutes is taken as the wall clock being set right (a machine that booted with a wrong
clock) and followed at once, with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

log = logging.getLogger(__name__)

#: How much faster or slower than real time the clock may run while it catches up with a
#: stepped wall clock.
MAX_SLEW = 0.05
#: A larger difference from the wall clock is followed at once (a clock being set right).
JUMP_MS = 600_000


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


def steady(previous_ms: int, elapsed_ms: int, wall_ms: int) -> int:
    """The clock's next reading: ``previous_ms`` plus the ``elapsed_ms`` counted by a
    monotonic clock since, moved towards ``wall_ms`` by at most ``MAX_SLEW`` of the elapsed
    time; ``wall_ms`` itself when it is more than ``JUMP_MS`` away.

    >>> steady(1_000_000, 1_000, 1_001_000)   # in step: follows real time
    1001000
    >>> steady(1_000_000, 1_000, 1_121_000)   # wall stepped +120 s: 5% faster, no jump
    1001050
    >>> steady(1_000_000, 1_000, 881_000)     # wall stepped -120 s: 5% slower, never back
    1000950
    >>> steady(1_000_000, 1_000, 9_000_000)   # set right by hours: followed at once
    9000000
    """
    base = previous_ms + elapsed_ms
    skew = wall_ms - base
    if abs(skew) > JUMP_MS:
        return wall_ms
    step = min(abs(skew), int(elapsed_ms * MAX_SLEW))
    return base + (step if skew > 0 else -step)


def _boot_ns() -> int:
    # CLOCK_BOOTTIME counts a suspended machine's time too; CLOCK_MONOTONIC elsewhere.
    clock_id = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return time.clock_gettime_ns(clock_id)


class SystemClock:
    """The wall clock, without its steps (see the module docstring). ``wall_ns`` and
    ``monotonic_ns`` are the sources (tests give their own to step the wall clock)."""

    def __init__(
        self,
        *,
        wall_ns: Callable[[], int] = time.time_ns,
        monotonic_ns: Callable[[], int] = _boot_ns,
    ) -> None:
        self._wall_ns, self._monotonic_ns = wall_ns, monotonic_ns
        self._lock = threading.Lock()
        #: The last reading and the monotonic time it was made at (ns).
        self._last = (wall_ns() // 1_000_000, monotonic_ns())

    def now_ms(self) -> int:
        with self._lock:
            previous, at = self._last
            mono = self._monotonic_ns()
            elapsed_ms = (mono - at) // 1_000_000
            if elapsed_ms <= 0:
                return previous
            wall_ms = self._wall_ns() // 1_000_000
            now = steady(previous, elapsed_ms, wall_ms)
            # Keep the remainder of the elapsed nanoseconds: no drift from rounding.
            self._last = (now, at + elapsed_ms * 1_000_000)
        if now == wall_ms and abs(wall_ms - (previous + elapsed_ms)) > JUMP_MS:
            log.warning(
                "the wall clock moved by %d s: Sluice's clock follows it",
                (wall_ms - previous - elapsed_ms) // 1000,
                extra={"action": "clock_jump"},
            )
        return now

    def skew_ms(self) -> int:
        """How far the wall clock is from this clock now (a step being absorbed)."""
        now = self.now_ms()
        return self._wall_ns() // 1_000_000 - now

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
