"""The job queue at a glance, for metrics and readiness (``engine/health.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain.states import JobState
from sluice.storage.tables import jobs as t


@dataclass(frozen=True)
class QueueStats:
    #: ``{(state, kind): count}`` for queued and running jobs.
    counts: dict[tuple[str, str], int]
    #: ``run_after_ms`` of the oldest queued job that is due; None when none is.
    oldest_due_ms: int | None


async def read(conn: AsyncConnection, now_ms: int) -> QueueStats:
    # Walks ix_jobs_status_id for the two live states only: done jobs are never counted.
    grouped = await conn.execute(
        sa.select(t.c.status, t.c.kind, sa.func.count())
        .where(t.c.status.in_([JobState.QUEUED, JobState.RUNNING]))
        .group_by(t.c.status, t.c.kind)
    )
    counts = {(str(status), str(kind)): int(n) for status, kind, n in grouped}
    oldest = await conn.scalar(
        sa.select(sa.func.min(t.c.run_after_ms)).where(
            t.c.status == JobState.QUEUED, t.c.run_after_ms <= now_ms
        )
    )
    return QueueStats(counts, int(oldest) if oldest is not None else None)


@dataclass(frozen=True)
class Backlog:
    """Each account's due queued jobs, and the jobs enqueued since a previous read."""

    #: ``{owner_id: (run_after_ms of its oldest due queued job, its due queued jobs and its
    #: claimed ones not done)}``, for the accounts with due queued jobs.
    due: dict[str, tuple[int, int]]
    #: ``{owner_id: jobs enqueued with an id above the previous read's max_id}``.
    added: dict[str, int]
    #: The largest job id now (the next read's starting point).
    max_id: int


def backlog(conn: Connection, now_ms: int, after_id: int | None) -> Backlog:
    """The backlog per account (``engine/queue/admission.py``): walks the queued jobs through
    ``ix_jobs_status_id``, and the jobs enqueued since ``after_id`` by their primary key: a read
    of its own, off the event loop, four times a second."""
    due = {
        str(owner): (int(oldest), int(count))
        for owner, oldest, count in conn.execute(
            sa.select(t.c.owner_id, sa.func.min(t.c.run_after_ms), sa.func.count())
            .where(t.c.status == JobState.QUEUED, t.c.run_after_ms <= now_ms)
            .group_by(t.c.owner_id)
        )
    }
    # An account's claimed jobs not done yet are part of its backlog (a worker claims a batch
    # into a local queue): counted, its run rate is of jobs finished, not of claims.
    for owner, count in conn.execute(
        sa.select(t.c.owner_id, sa.func.count())
        .where(t.c.status == JobState.RUNNING)
        .group_by(t.c.owner_id)
    ):
        if str(owner) in due:
            oldest, queued = due[str(owner)]
            due[str(owner)] = (oldest, queued + int(count))
    added: dict[str, int] = {}
    max_id = after_id or 0
    if after_id is None:
        max_id = int(conn.scalar(sa.select(sa.func.max(t.c.id))) or 0)
    else:
        for owner, count, top in conn.execute(
            sa.select(t.c.owner_id, sa.func.count(), sa.func.max(t.c.id))
            .where(t.c.id > after_id)
            .group_by(t.c.owner_id)
        ):
            added[str(owner)] = int(count)
            max_id = max(max_id, int(top))
    return Backlog(due, added, max_id)
