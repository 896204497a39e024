"""Time, behind a small port so tests move a fake clock instead of sleeping."""

from __future__ import annotations

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


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told: ``clock.advance(seconds=15)``."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, *, seconds: float = 0, ms: int = 0) -> None:
        self._now += int(seconds * 1000) + ms

    def set(self, epoch_ms: int) -> None:
        self._now = epoch_ms
