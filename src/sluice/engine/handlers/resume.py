"""``resume`` jobs: a run paused by ``$.flow.delay``, ``suspend`` or ``rerun`` is woken (its
time came, or its resume or cancel URL was called: ``engine/runs/pauses.py``) and carried on in its
workflow's warm worker, from the step ``domain/flow.py`` decides, with the earlier steps'
exports and return values; its record is updated in place (same run id).

A job that is not the run's current pause (the run was trimmed, or is no longer paused) does
nothing. A run that cannot be carried on ends ``cancelled`` with an error saying why
(``domain.flow.Abandoned``): its workflow was deactivated (or deleted: its runs normally go
with it) or the paused step was removed while it waited.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import iso_ms
from sluice.domain import flow
from sluice.domain.jobs import ResumeJob
from sluice.domain.runs import Run
from sluice.domain.states import RunStatus
from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.executor import Executor
from sluice.engine.runs.pauses import Resumed
from sluice.storage import runs
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


class ResumeJobs:
    def __init__(self, db: AsyncEngine, executor: Executor) -> None:
        self.db = db
        self.executor = executor

    async def __call__(self, job: Job, finish: Finish) -> None:
        wake = ResumeJob.of(job.payload)
        async with self.db.connect() as conn:
            run = await conn.run_sync(runs.get_sync, wake.run_id)
        if run is None or run.pause is None or run.pause.get("job_id") != job.id:
            return  # trimmed, or woken already: this job is not its pause any more
        workflow = await self.executor.load(run.owner_id, run.workflow_id)
        pause = flow.Pause.from_json(run.pause)
        if workflow is None or not workflow.active:
            why = flow.Abandoned.WORKFLOW_DELETED if workflow is None else None
            await self._abandon(job, run, pause, why or flow.Abandoned.WORKFLOW_INACTIVE, finish)
            return
        woke = flow.resumption(pause, wake.action, wake.data)
        # The workflow may have been updated while the run waited: steps keep their ids.
        index = next((i for i, s in enumerate(workflow.steps) if s["id"] == pause.step_id), None)
        if index is None:
            await self._abandon(job, run, pause, flow.Abandoned.STEP_REMOVED, finish)
            return
        if woke.start is not None:
            woke.start = index + (woke.start - pause.index)
        run.steps = flow.resumed_steps(run.steps, pause, woke)
        log.info(
            "run %s woken (%s, %s)",
            run.id,
            wake.action,
            pause.kind,
            extra={"action": "flow_resume", "run_id": run.id, "workflow": run.workflow_id},
        )
        await self.executor.execute(
            workflow,
            run.event,
            source_type=str(run.context.get("source_type") or "MANUAL"),
            mark_done=finish,
            resumed=Resumed(run, woke.start, woke.run),
        )

    async def _abandon(
        self, job: Job, run: Run, pause: flow.Pause, why: flow.Abandoned, finish: Finish
    ) -> None:
        """End a run that cannot be carried on, with the job's done mark in one transaction.
        Nothing is sent to ``$errors``: the run did not fail, its workflow changed under it."""
        now_ms = self.executor.clock.now_ms()
        steps, error = flow.abandoned(run.steps, pause, why, iso_ms(now_ms))
        ended = replace(run, status=RunStatus.CANCELLED, steps=steps, error=error, pause=None)

        def transaction(conn: Connection) -> None:
            finish(conn)
            current = runs.get_sync(conn, run.id)
            if current is not None and (current.pause or {}).get("job_id") == job.id:
                runs.update_sync(conn, ended, len(run.sends))

        await self.executor.commit.write(transaction)
        log.info(
            "paused run %s ended: %s",
            run.id,
            why,
            extra={"action": "flow_abandoned", "run_id": run.id, "workflow": run.workflow_id},
        )
