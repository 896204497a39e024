"""Timers: one row per deployed source with an active ``$.interface.timer`` prop, or per active
workflow with a timer trigger (``kind`` says which).

``next_run_ms`` is the next tick to fire. ``claim_due`` moves it forward and enqueues the
tick's job in the caller's transaction, so a tick is never lost (a crash before the commit
leaves the row as it was) and never doubled: PostgreSQL locks the rows it claims with
``FOR UPDATE SKIP LOCKED``, so two processes take disjoint rows; SQLite has one writer (a
transaction that read a row another process has since moved fails to write it). ``last_run_ms``
is the last tick fired (its scheduled time). The row goes with its deployment (``ON DELETE
CASCADE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain import schedules
from sluice.domain.jobs import Ticked, TimerJob
from sluice.domain.schedules import Schedule
from sluice.domain.states import JobKind, JobState
from sluice.storage.tables import jobs as jobs_table
from sluice.storage.tables import timers as t


@dataclass(frozen=True)
class Timer:
    deployment_id: str
    owner_id: str
    schedule: Schedule
    next_run_ms: int
    last_run_ms: int | None
    ticked: Ticked


@dataclass(frozen=True)
class Tick:
    """One tick claimed and enqueued."""

    deployment_id: str
    owner_id: str
    tick_ms: int


def _timer(row: Any) -> Timer:
    return Timer(
        row.deployment_id,
        row.owner_id,
        Schedule(row.interval_seconds, row.cron, row.timezone),
        row.next_run_ms,
        row.last_run_ms,
        Ticked(row.kind),
    )


async def get(conn: AsyncConnection, deployment_id: str) -> Timer | None:
    row = (await conn.execute(sa.select(t).where(t.c.deployment_id == deployment_id))).first()
    return _timer(row) if row else None


async def sync(
    conn: AsyncConnection,
    *,
    deployment_id: str,
    owner_id: str,
    ticked: Ticked,
    schedule: dict[str, Any] | None,
    active: bool,
    now_ms: int,
) -> None:
    """Make the timer match the deployment, after deploy, update, activate or deactivate.

    ``schedule`` is the configured timer prop (``{intervalSeconds}`` or ``{cron,
    timezone}``), None when the source has none. No schedule, or an inactive source: no timer.
    A schedule that did not change keeps its next tick, so updating other props never resets
    the phase; a new one starts at its first tick after ``now_ms``."""
    if schedule is None or not active:
        await delete(conn, deployment_id)
        return
    wanted = Schedule.from_value(schedule)
    query = sa.select(t).where(t.c.deployment_id == deployment_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    if row is not None and _timer(row).schedule == wanted:
        return
    values = {
        "owner_id": owner_id,
        "kind": str(ticked),
        "interval_seconds": wanted.interval_seconds,
        "cron": wanted.cron,
        "timezone": wanted.timezone,
        "next_run_ms": schedules.next_tick_ms(wanted, now_ms),
    }
    if row is None:
        await conn.execute(t.insert().values(deployment_id=deployment_id, **values))
    else:
        await conn.execute(t.update().where(t.c.deployment_id == deployment_id).values(**values))


async def delete(conn: AsyncConnection, deployment_id: str) -> None:
    await conn.execute(t.delete().where(t.c.deployment_id == deployment_id))


async def claim_due(
    conn: AsyncConnection,
    *,
    now_ms: int,
    limit: int,
) -> list[Tick]:
    """Fire up to ``limit`` due timers, earliest first: for each, enqueue a ``timer`` job whose
    payload is the tick's event and what it ticks for (``TimerJob``), and move ``next_run_ms``
    past ``now_ms`` (after downtime the first missed tick fires once, see ``schedules.due``).
    Three statements whatever the batch."""
    query = sa.select(t).where(t.c.next_run_ms <= now_ms).order_by(t.c.next_run_ms).limit(limit)
    if conn.dialect.name == "postgresql":
        # The rows stay locked until the commit: a second scheduler skips them, and by the time
        # it could see them again their next_run_ms has moved.
        query = query.with_for_update(skip_locked=True)
    ticks: list[Tick] = []
    moves: list[dict[str, Any]] = []
    new_jobs: list[dict[str, Any]] = []
    for timer in [_timer(r) for r in await conn.execute(query)]:
        fire, next_ms = schedules.due(timer.schedule, timer.next_run_ms, now_ms)
        if not fire:
            continue
        ticks.append(Tick(timer.deployment_id, timer.owner_id, timer.next_run_ms))
        moves.append({"d": timer.deployment_id, "next_ms": next_ms, "tick_ms": timer.next_run_ms})
        new_jobs.append(
            {
                "kind": JobKind.TIMER,
                "owner_id": timer.owner_id,
                "target_id": timer.deployment_id,
                "payload": TimerJob(
                    schedules.tick_event(timer.schedule, timer.next_run_ms), timer.ticked
                ).to_json(),
                "status": JobState.QUEUED,
                "attempts": 0,
                "run_after_ms": now_ms,
                "created_ms": now_ms,
            }
        )
    if ticks:
        await conn.execute(
            t.update()
            .where(t.c.deployment_id == sa.bindparam("d"))
            .values(next_run_ms=sa.bindparam("next_ms"), last_run_ms=sa.bindparam("tick_ms")),
            moves,
        )
        await conn.execute(jobs_table.insert(), new_jobs)
    return ticks


async def next_due_ms(conn: AsyncConnection) -> int | None:
    """The earliest ``next_run_ms`` of all timers (None without timers)."""
    query = sa.select(sa.func.min(t.c.next_run_ms))
    value = (await conn.execute(query)).scalar_one_or_none()
    return int(value) if value is not None else None
