"""Workflow runs as the API reads them: one run, a workflow's runs newest first, and a run
started now (a manual run, a replay) and waited for."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import ids
from sluice.domain.runs import Run
from sluice.domain.workflows import Workflow
from sluice.engine.runs.client_runs import ClientRuns
from sluice.storage import runs


class Runs:
    def __init__(self, db: AsyncEngine, client_runs: ClientRuns) -> None:
        self.db = db
        self.client_runs = client_runs
        #: Runs going on past their caller's wait (held here, or the loop could drop them).
        self._tasks: set[asyncio.Future[Any]] = set()

    async def get(self, owner_id: str, run_id: str) -> Run | None:
        async with self.db.connect() as conn:
            return await runs.get(conn, owner_id, run_id)

    async def page(
        self, workflow_id: str, *, limit: int, before: str | None, after: str | None
    ) -> tuple[list[Run], int]:
        """Newest first; ``before``/``after`` run ids. The page and the total count."""
        async with self.db.connect() as conn:
            return await runs.page(conn, workflow_id, limit=limit, before=before, after=after)

    async def run_now(
        self, workflow: Workflow, payload: dict[str, Any], wait_s: float
    ) -> Run | None:
        """Run ``workflow`` on ``payload`` (its ``event``, ``source_type``, ``replay_of``) in this
        process now, without a job (``engine/runs/client_runs.py``), waiting up to ``wait_s``; the
        run as stored, or None when it could not finish now (then a job is stored and runs it
        again, or, past ``wait_s``, the run goes on and is stored when it ends)."""
        run_id = ids.random_token(27)
        task = asyncio.ensure_future(
            self.client_runs.run(
                workflow,
                payload.get("event"),
                source_type=str(payload.get("source_type") or "MANUAL"),
                run_id=run_id,
                replay_of=payload.get("replay_of"),
            )
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                done = await asyncio.shield(task)
                if done.run is not None:
                    return done.run  # as stored, not read back
        return await self.get(workflow.owner_id, run_id)
