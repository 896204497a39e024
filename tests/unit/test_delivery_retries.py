"""The retry schedule of webhook deliveries (``domain/deliveries.py``), walked on a fake clock:
attempts go on for hours (not 5 attempts in ~15 s, as before), each delay a full-jitter draw
under a ceiling that doubles to its cap, until the max age or the max attempts; then dead."""

from __future__ import annotations

import itertools
import random

from sluice.clock import FakeClock
from sluice.domain import deliveries
from sluice.domain.deliveries import RetryPolicy

HOUR_MS = 3_600_000


def _schedule(policy: RetryPolicy, draw: random.Random) -> list[int]:
    """The times of every attempt of a delivery that always fails, from its creation."""
    clock = FakeClock()
    since = clock.now_ms()
    times = [since]
    attempts = 1
    while True:
        at = deliveries.next_attempt_ms(
            policy, attempts=attempts, since_ms=since, now_ms=clock.now_ms(), draw=draw.random()
        )
        if at is None:
            return [t - since for t in times]
        assert at >= clock.now_ms()
        clock.set(at)
        times.append(at)
        attempts += 1


def test_the_default_schedule_retries_for_a_day_with_jittered_growing_delays() -> None:
    times = _schedule(RetryPolicy(), random.Random(1))
    assert times[-1] <= 24 * HOUR_MS  # never past the max age
    assert times[-1] > 23 * HOUR_MS  # ...and retried up to nearly that
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) > 5 and sum(gaps[:5]) < 60_000  # quick at first
    # Full jitter under a ceiling: each gap at most its ceiling, capped at 15 minutes.
    for n, gap in enumerate(gaps, start=1):
        assert 0 <= gap <= deliveries.ceiling_ms(RetryPolicy(), n) <= 900_000
    # Once at the cap, gaps spread over [0, 15 min] rather than all being equal.
    late = gaps[20:]
    assert min(late) < 300_000 < 600_000 < max(late)


def test_a_receiver_down_past_the_old_backoff_is_still_being_tried() -> None:
    # The old rule gave up after 5 attempts, about 15 s; an outage of 45 s lost events.
    times = _schedule(RetryPolicy(), random.Random(2))
    assert [t for t in times if t > 45_000], "attempts continue after a 45 s outage"
    assert any(t > 12 * HOUR_MS for t in times)


def test_max_attempts_and_max_age_end_the_schedule() -> None:
    assert len(_schedule(RetryPolicy(max_attempts=7), random.Random(3))) == 7
    short = _schedule(RetryPolicy(first_ms=1000, cap_ms=4000, max_age_ms=60_000), random.Random(4))
    assert short[-1] <= 60_000 and len(short) > 10


def test_the_same_draws_give_the_same_schedule_and_other_draws_another() -> None:
    policy = RetryPolicy()
    assert _schedule(policy, random.Random(5)) == _schedule(policy, random.Random(5))
    assert _schedule(policy, random.Random(5)) != _schedule(policy, random.Random(6))


def test_a_retry_by_hand_starts_a_new_schedule() -> None:
    policy = RetryPolicy(max_age_ms=HOUR_MS)
    now = 10 * HOUR_MS
    # Made 10 hours ago: dead. Retried by hand now (since = now): tried again.
    assert deliveries.next_attempt_ms(policy, attempts=1, since_ms=0, now_ms=now, draw=0.5) is None
    again = deliveries.next_attempt_ms(policy, attempts=1, since_ms=now, now_ms=now, draw=0.5)
    assert again == now + 500


def test_a_slow_webhook_gets_only_its_own_slots() -> None:
    # 64 due deliveries of a slow webhook ahead of one of another: the other still starts.
    targets = ["slow"] * 64 + ["fast"]
    picked = deliveries.pick(targets, busy={}, free=16, per_target=8)
    assert [targets[p] for p in picked].count("slow") == 8 and targets[picked[-1]] == "fast"
    assert deliveries.pick(targets, busy={"slow": 8}, free=16, per_target=8) == [64]
    assert deliveries.full({"slow": 8, "fast": 1}, per_target=8) == ["slow"]
