"""Workflow runs as the API reads them: one run, a workflow's runs newest first, and a run
started now (a manual run, a replay) and waited for."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import ids
from sluice.domain.states import JobKind
from sluice.engine.ingress import Ingress
from sluice.storage import runs
from sluice.storage.job_batches import NewJob
from sluice.storage.runs import Run
from sluice.storage.workflows import Workflow


class Runs:
    def __init__(self, db: AsyncEngine, ingress: Ingress) -> None:
        self.db = db
        self.ingress = ingress

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
        """Run ``workflow`` on ``payload`` in this process now, waiting up to ``wait_s``; the
        run, or None when it could not finish now (its job is stored and runs again)."""
        run_id = ids.random_token(27)
        await self.ingress.run_now_and_wait(
            NewJob(JobKind.WORKFLOW, workflow.owner_id, workflow.id, {**payload, "run_id": run_id}),
            wait_s,
        )
        return await self.get(workflow.owner_id, run_id)
