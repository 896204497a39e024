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


def oldest_due_by_owner(conn: Connection, now_ms: int) -> dict[str, int]:
    """``{owner_id: run_after_ms}`` of each account's oldest queued job that is due (the
    backlog's age per account; ``engine/admission.py``). Walks the queued jobs through
    ``ix_jobs_status_id``: a read of its own, off the event loop, once a second."""
    rows = conn.execute(
        sa.select(t.c.owner_id, sa.func.min(t.c.run_after_ms))
        .where(t.c.status == JobState.QUEUED, t.c.run_after_ms <= now_ms)
        .group_by(t.c.owner_id)
    )
    return {str(owner): int(oldest) for owner, oldest in rows}
