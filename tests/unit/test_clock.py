"""The system clock never steps: it counts elapsed time on a monotonic clock and slews
towards a stepped wall clock (``clock.steady``). Fake sources stand for the kernel's clocks,
so a step is made, not waited for."""

from __future__ import annotations

import doctest
import itertools

from sluice import clock
from sluice.clock import SystemClock

START_MS = 1_700_000_000_000


class Sources:
    """A wall clock that a test steps, and a monotonic one that only moves forward."""

    def __init__(self) -> None:
        self.wall_ms = START_MS
        self.mono_ms = 10_000

    def pass_time(self, seconds: float) -> None:
        self.wall_ms += int(seconds * 1000)
        self.mono_ms += int(seconds * 1000)

    def system_clock(self) -> SystemClock:
        return SystemClock(
            wall_ns=lambda: self.wall_ms * 1_000_000, monotonic_ns=lambda: self.mono_ms * 1_000_000
        )


def test_doctests() -> None:
    assert doctest.testmod(clock).failed == 0


def test_in_step_it_is_the_wall_clock() -> None:
    sources = Sources()
    system = sources.system_clock()
    sources.pass_time(90)
    assert system.now_ms() == START_MS + 90_000
    assert system.skew_ms() == 0


def test_a_forward_step_is_absorbed_at_most_five_percent_fast() -> None:
    sources = Sources()
    system = sources.system_clock()
    sources.wall_ms += 120_000  # an NTP step, a VM restored
    readings = []
    for _ in range(30):  # a 30 s lease: never more than 1.5 s early
        sources.pass_time(1)
        readings.append(system.now_ms())
    assert readings[-1] - START_MS == 30_000 + 1_500
    assert all(b - a == 1_050 for a, b in itertools.pairwise(readings))
    for _ in range(2_400):  # absorbed within 40 minutes, then in step again
        sources.pass_time(1)
        system.now_ms()
    assert system.skew_ms() == 0


def test_a_backward_step_never_moves_it_back() -> None:
    sources = Sources()
    system = sources.system_clock()
    before = system.now_ms()
    sources.wall_ms -= 120_000
    sources.pass_time(10)
    after = system.now_ms()
    assert after - before == 9_500  # 5% slow, still forward: timers keep ticking
    assert system.skew_ms() == -120_000 + 500


def test_a_wall_clock_set_right_by_hours_is_followed() -> None:
    sources = Sources()
    system = sources.system_clock()
    sources.wall_ms += 3 * 3_600_000
    sources.pass_time(1)
    assert system.now_ms() == sources.wall_ms


def test_readings_between_milliseconds_do_not_drift() -> None:
    sources = Sources()
    system = sources.system_clock()
    ns = [sources.mono_ms * 1_000_000]
    system._monotonic_ns = lambda: ns[0]  # sub-millisecond steps
    system._wall_ns = lambda: START_MS * 1_000_000 + (ns[0] - 10_000 * 1_000_000)
    for _ in range(10_000):
        ns[0] += 300_000  # 0.3 ms
        system.now_ms()
    assert system.now_ms() == START_MS + 3_000
