"""The ``resume`` job of a paused run, moved to now by its resume or cancel URL."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from sluice.domain.states import JobKind, JobState
from sluice.storage.tables import jobs as t


def wake_sync(conn: Connection, job_id: int, payload: Any, now_ms: int) -> bool:
    """Due now, with ``payload``; False when the job is no longer waiting (it is running or
    ran: the run woke already)."""
    result = conn.execute(
        t.update()
        .where(t.c.id == job_id, t.c.kind == JobKind.RESUME, t.c.status == JobState.QUEUED)
        .values(run_after_ms=now_ms, payload=payload)
    )
    return bool(result.rowcount == 1)
