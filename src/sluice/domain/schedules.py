"""Timer schedules: when the next tick is, and what a scheduler does with a tick that is due.

Pure: every function takes the time it needs (epoch milliseconds) and returns a decision.

A schedule is an interval or a standard five-field cron expression (with an IANA timezone,
UTC when none), the two shapes of a configured ``$.interface.timer`` prop.

* **Interval ticks** fall on whole seconds. A timer scheduled at ``t`` first fires at the
  first whole second ``interval`` after ``t`` (``next_tick_ms``), then every ``interval``
  on that grid: the phase is set when the schedule is (re)configured and scheduler lag never
  makes it drift.
* **Cron ticks** are the instants whose wall-clock time in the timezone matches the
  expression (croniter; day of month and day of week OR-ed as in Vixie cron). Across DST:
  a wall time skipped in spring fires once at the end of the gap (02:30 → 03:00); in autumn's
  repeated hour, a fixed-time entry (no ``*`` in its minute and hour fields, e.g. ``30 2 * *
  *``) fires once, in the first pass, while ``*``-entries keep firing on real time (``0 * * *
  *`` fires at both 02:00s), as Vixie cron does.
* **Missed ticks** (``due``): when the scheduler comes back after downtime, the first missed
  tick fires once, and the next one is the first tick after now: no burst of catch-up runs.

Pipedream's minimum interval is 15 s (``SLUICE_TIMER_MIN_INTERVAL_SECONDS``); a cron
expression cannot fire more than once a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from sluice.domain import components
from sluice.errors import InvalidProps

DEFAULT_MIN_INTERVAL_SECONDS = 15


@dataclass(frozen=True)
class Schedule:
    """``interval_seconds`` or ``cron`` (with ``timezone``, None meaning UTC)."""

    interval_seconds: int | None = None
    cron: str | None = None
    timezone: str | None = None

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> Schedule:
        """From a configured timer prop: ``{intervalSeconds}`` or ``{cron, timezone?}``."""
        interval = value.get("intervalSeconds")
        if interval is not None:
            return cls(interval_seconds=int(interval))
        return cls(cron=value.get("cron"), timezone=value.get("timezone"))


def configured_timer(
    props: list[dict[str, Any]], configured: dict[str, Any]
) -> dict[str, Any] | None:
    """The configured value of the component's timer prop (the first, if it has several),
    or None when it has none: what ``storage.timers.sync`` takes."""
    for prop in props:
        if prop.get("type") == components.TIMER:
            value = configured.get(prop["name"])
            return dict(value) if isinstance(value, dict) else None
    return None


MAX_CRON_CHARS = 200


def validate(
    schedule: Schedule,
    where: str,
    *,
    min_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS,
    now_ms: int = 0,
) -> None:
    """Raise ``InvalidProps`` naming the field (``<where>.cron`` …) unless the schedule can
    run: an interval of at least ``min_interval_seconds``, or a cron expression that parses
    and matches some time, in a timezone that exists."""
    if schedule.interval_seconds is not None:
        if schedule.interval_seconds < min_interval_seconds:
            raise InvalidProps(
                f"intervalSeconds must be at least {min_interval_seconds} "
                f"(timers fire at most every {min_interval_seconds} s), "
                f"not {schedule.interval_seconds}",
                field=f"{where}.intervalSeconds",
            )
        return
    if not schedule.cron:
        raise InvalidProps("a timer needs intervalSeconds or cron", field=where)
    _zone(schedule.timezone, where)
    if len(schedule.cron) > MAX_CRON_CHARS:  # its column's size; real ones are far shorter
        raise InvalidProps(f"cron is over {MAX_CRON_CHARS} characters long", field=f"{where}.cron")
    fields = schedule.cron.split()
    if len(fields) != 5 or not croniter.is_valid(schedule.cron):
        raise InvalidProps(
            f"cron must be a five-field cron expression (minute hour day-of-month month "
            f"day-of-week) such as '*/15 * * * *', not {schedule.cron!r}",
            field=f"{where}.cron",
        )
    try:
        next_tick_ms(schedule, now_ms)
    except CroniterError as exc:  # parses, but no date matches (e.g. February 30)
        raise InvalidProps(f"cron {schedule.cron!r} never fires", field=f"{where}.cron") from exc


def _zone(name: str | None, where: str = "timer") -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidProps(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/Paris' or 'UTC'",
            field=f"{where}.timezone",
        ) from exc


def next_tick_ms(schedule: Schedule, after_ms: int) -> int:
    """The first tick strictly after ``after_ms``; for an interval, the start of its grid."""
    if schedule.interval_seconds is not None:
        return (after_ms // 1000 + schedule.interval_seconds) * 1000
    assert schedule.cron is not None
    zone = _zone(schedule.timezone)
    fixed_time = not any(f.startswith("*") for f in schedule.cron.split()[:2])
    it = croniter(schedule.cron, datetime.fromtimestamp(after_ms / 1000, zone))
    while True:
        at = it.get_next(datetime)
        tick = int(at.timestamp()) * 1000  # cron ticks fall on whole minutes
        # The second pass of autumn's repeated hour: a fixed-time entry already fired.
        if fixed_time and datetime.fromtimestamp(tick / 1000, zone).fold == 1:
            continue
        if tick > after_ms:
            return tick


def due(schedule: Schedule, next_run_ms: int, now_ms: int) -> tuple[bool, int]:
    """``(fire, new_next_ms)``. A tick fires when its time has come; after downtime only the
    first missed tick fires, and the next one is the first tick after ``now_ms`` (for an
    interval, on the same grid)."""
    if now_ms < next_run_ms:
        return False, next_run_ms
    if schedule.interval_seconds is not None:
        step = schedule.interval_seconds * 1000
        return True, next_run_ms + ((now_ms - next_run_ms) // step + 1) * step
    return True, next_tick_ms(schedule, now_ms)


def tick_event(schedule: Schedule, tick_ms: int) -> dict[str, Any]:
    """What ``run(event)`` gets: ``{timestamp, interval_seconds}`` (the spec: epoch seconds of
    the tick). A cron tick also carries what Pipedream's schedule trigger adds: ``cron`` and
    the tick's time broken down in the configured timezone and in UTC."""
    event: dict[str, Any] = {
        "timestamp": tick_ms // 1000,
        "interval_seconds": schedule.interval_seconds,
    }
    if schedule.cron is not None:
        event["cron"] = schedule.cron
        event["timezone_configured"] = _moment(tick_ms, _zone(schedule.timezone))
        event["timezone_utc"] = _moment(tick_ms, ZoneInfo("UTC"))
    return event


def _moment(ms: int, zone: ZoneInfo) -> dict[str, Any]:
    at = datetime.fromtimestamp(ms / 1000, zone)
    stamp = at.isoformat(timespec="milliseconds")  # ends with the ±HH:MM offset
    return {
        "iso8601": {
            "timestamp": stamp,
            "date": at.date().isoformat(),
            "time": at.time().isoformat(timespec="milliseconds"),
            "tz_offset": stamp[-6:],
        },
        "year": at.year,
        "month": at.month,
        "day_of_month": at.day,
        "day_of_week": at.isoweekday(),
        "hour": at.hour,
        "minute": at.minute,
        "second": at.second,
        "timezone": zone.key,
    }
