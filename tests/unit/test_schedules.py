"""Timer schedules: interval and cron ticks, timezones across DST, missed ticks, validation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sluice.domain import props, schedules
from sluice.domain.schedules import Schedule
from sluice.errors import InvalidProps


def ms(text: str) -> int:
    """``"2026-03-29T01:00Z"`` → epoch ms."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def ticks(schedule: Schedule, start: str, n: int) -> list[str]:
    out, at = [], ms(start)
    for _ in range(n):
        at = schedules.next_tick_ms(schedule, at)
        out.append(iso(at))
    return out


EVERY_15S = Schedule(interval_seconds=15)


def test_interval_ticks_fall_on_whole_seconds_one_interval_after_scheduling() -> None:
    assert schedules.next_tick_ms(EVERY_15S, 1_700_000_000_123) == 1_700_000_015_000
    assert schedules.next_tick_ms(EVERY_15S, 1_700_000_000_000) == 1_700_000_015_000


def test_interval_due_keeps_the_grid_when_late() -> None:
    start = 1_700_000_015_000
    assert schedules.due(EVERY_15S, start, start - 1) == (False, start)
    assert schedules.due(EVERY_15S, start, start) == (True, start + 15_000)
    # Fired 3.2 s late: the next tick is still on the grid, not 15 s after the late run.
    assert schedules.due(EVERY_15S, start, start + 3_200) == (True, start + 15_000)


def test_after_downtime_a_missed_tick_fires_once_then_back_on_schedule() -> None:
    first = 1_700_000_015_000
    now = first + 10 * 15_000 + 4_000  # down for ten intervals
    fire, next_ms = schedules.due(EVERY_15S, first, now)
    assert fire and next_ms == first + 11 * 15_000  # the first grid tick after now
    # A scheduler polling every second from then on fires nothing until that tick.
    fired = []
    for t in range(now + 1_000, first + 12 * 15_000 + 1, 1_000):
        fire, moved = schedules.due(EVERY_15S, next_ms, t)
        if fire:
            fired.append(t)
            next_ms = moved
    assert fired == [first + 11 * 15_000, first + 12 * 15_000]


def test_cron_after_downtime_fires_once_and_resumes_after_now() -> None:
    every_quarter = Schedule(cron="*/15 * * * *")
    fire, next_ms = schedules.due(every_quarter, ms("2026-01-05T12:00Z"), ms("2026-01-05T15:07Z"))
    assert fire and iso(next_ms) == "2026-01-05T15:15Z"


def test_cron_in_utc() -> None:
    every_quarter = Schedule(cron="*/15 * * * *")
    assert ticks(every_quarter, "2026-01-05T12:07Z", 3) == [
        "2026-01-05T12:15Z",
        "2026-01-05T12:30Z",
        "2026-01-05T12:45Z",
    ]
    # Strictly after: from a tick, the next one.
    at = ms("2026-01-05T12:15Z")
    assert iso(schedules.next_tick_ms(every_quarter, at)) == "2026-01-05T12:30Z"
    # Day of month and day of week are OR-ed (Vixie cron): the 1st, and every Monday.
    assert ticks(Schedule(cron="0 0 1 * 1"), "2026-01-01T00:00Z", 3) == [
        "2026-01-05T00:00Z",
        "2026-01-12T00:00Z",
        "2026-01-19T00:00Z",
    ]


def test_cron_in_a_timezone_follows_its_offset_across_dst() -> None:
    nine = Schedule(cron="0 9 * * *", timezone="America/New_York")
    # New York springs forward on 2026-03-08: 09:00 EST is 14:00Z, 09:00 EDT 13:00Z.
    assert ticks(nine, "2026-03-06T15:00Z", 3) == [
        "2026-03-07T14:00Z",
        "2026-03-08T13:00Z",
        "2026-03-09T13:00Z",
    ]


def test_spring_forward_a_skipped_time_fires_once_at_the_end_of_the_gap() -> None:
    # Paris, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00Z).
    daily = Schedule(cron="30 2 * * *", timezone="Europe/Paris")
    assert ticks(daily, "2026-03-28T12:00Z", 3) == [
        "2026-03-29T01:00Z",  # 03:00 CEST: 02:30 did not exist that night
        "2026-03-30T00:30Z",  # 02:30 CEST
        "2026-03-31T00:30Z",
    ]
    hourly = Schedule(cron="0 * * * *", timezone="Europe/Paris")
    assert ticks(hourly, "2026-03-28T23:30Z", 3) == [
        "2026-03-29T00:00Z",  # 01:00 CET
        "2026-03-29T01:00Z",  # 03:00 CEST: one real hour later
        "2026-03-29T02:00Z",
    ]


def test_fall_back_a_fixed_time_fires_once_and_hourly_keeps_real_hours() -> None:
    # Paris, 2026-10-25: 03:00 CEST falls back to 02:00 CET (01:00Z); 02:xx happens twice.
    daily = Schedule(cron="30 2 * * *", timezone="Europe/Paris")
    assert ticks(daily, "2026-10-24T12:00Z", 3) == [
        "2026-10-25T00:30Z",  # 02:30 CEST; not again at 02:30 CET (01:30Z)
        "2026-10-26T01:30Z",
        "2026-10-27T01:30Z",
    ]
    hourly = Schedule(cron="0 * * * *", timezone="Europe/Paris")
    assert ticks(hourly, "2026-10-24T23:30Z", 4) == [
        "2026-10-25T00:00Z",  # 02:00 CEST
        "2026-10-25T01:00Z",  # 02:00 CET
        "2026-10-25T02:00Z",
        "2026-10-25T03:00Z",
    ]


def test_events() -> None:
    assert schedules.tick_event(EVERY_15S, 1_700_000_015_000) == {
        "timestamp": 1_700_000_015,
        "interval_seconds": 15,
    }
    event = schedules.tick_event(
        Schedule(cron="0 9 * * *", timezone="Europe/Paris"), ms("2026-07-01T07:00Z")
    )
    assert event["timestamp"] == ms("2026-07-01T07:00Z") // 1000
    assert event["interval_seconds"] is None and event["cron"] == "0 9 * * *"
    local = event["timezone_configured"]
    assert local["iso8601"]["timestamp"] == "2026-07-01T09:00:00.000+02:00"
    assert (local["hour"], local["timezone"]) == (9, "Europe/Paris")
    assert event["timezone_utc"]["iso8601"]["date"] == "2026-07-01"
    assert event["timezone_utc"]["hour"] == 7


@pytest.mark.parametrize(
    ("schedule", "field", "words"),
    [
        (Schedule(interval_seconds=14), "t.intervalSeconds", "at least 15"),
        (Schedule(cron="61 * * * *"), "t.cron", "five-field"),
        (Schedule(cron="0 * * * * *"), "t.cron", "five-field"),
        (Schedule(cron="every hour"), "t.cron", "five-field"),
        (Schedule(cron="0 0 30 2 *"), "t.cron", "never fires"),
        (Schedule(cron="0 * * * *", timezone="Mars/Olympus"), "t.timezone", "unknown timezone"),
        (Schedule(cron="0 * * * *", timezone="../../etc/passwd"), "t.timezone", "IANA"),
    ],
)
def test_invalid_schedules_name_the_field(schedule: Schedule, field: str, words: str) -> None:
    with pytest.raises(InvalidProps) as caught:
        schedules.validate(schedule, "t")
    assert caught.value.field == field and words in caught.value.message


def test_valid_schedules_and_the_minimum_setting() -> None:
    schedules.validate(Schedule(interval_seconds=15), "t")
    schedules.validate(Schedule(cron="0 0 29 2 *", timezone="Asia/Tokyo"), "t")
    with pytest.raises(InvalidProps, match="at least 60"):
        schedules.validate(Schedule(interval_seconds=30), "t", min_interval_seconds=60)


def test_configured_props_are_validated_at_deploy() -> None:
    timer = [{"name": "timer", "type": "$.interface.timer"}]
    with pytest.raises(InvalidProps) as caught:
        props.check_configured(timer, {"timer": {"intervalSeconds": 5}})
    assert caught.value.field == "configured_props.timer.intervalSeconds"
    with pytest.raises(InvalidProps) as caught:
        props.check_configured(timer, {"timer": {"cron": "* * * * *", "timezone": "Nowhere"}})
    assert caught.value.field == "configured_props.timer.timezone"
    # A default under the minimum fails too; the setting can lower it.
    fast = [{"name": "timer", "type": "$.interface.timer", "default": {"intervalSeconds": 5}}]
    with pytest.raises(InvalidProps):
        props.check_configured(fast, {})
    out = props.check_configured(fast, {}, min_timer_interval_seconds=1)
    assert out.plain["timer"] == {"intervalSeconds": 5, "cron": None}
    assert schedules.configured_timer(fast, out.plain) == {"intervalSeconds": 5, "cron": None}
    assert schedules.configured_timer([], {}) is None
