"""Runs a client waits for: a request to a workflow's endpoint that answers with its steps'
``$.respond`` (a custom response), and a manual run or replay (``POST …/runs``).

Such a run is not stored as a job first: nothing has been acknowledged before it ends (the
client waits for its answer), so the run is made durable by the one transaction that stores it
(``engine/state/commit.py``), and the client is answered after that commit. A process that dies in
between has answered no one; the client sees its connection drop and nothing is stored. This
saves the job's insert, its claim and its "done" mark: three writes of four.

Two cases still store a job, at the moment they acknowledge something:

- an **immediate** ``$.respond`` (``immediate: true``) answers the client while the run goes on:
  before that answer, the run's job is stored, held by this worker (its lease renewed); the
  run's commit marks it done. A process that dies after the answer leaves the job to run again
  once its lease passes (at least once, as every acknowledged job);
- a run that **could not finish** (the runner crashed, or storing it failed): a job is stored
  for the job worker to run it again, and the client is told so (503), as before.

A run takes a slot of the job worker (``JobWorker.slot``): the account's share first, then one
of the worker's, as a job would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from sluice import errors, ids
from sluice.domain.jobs import WorkflowJob
from sluice.domain.runs import Run
from sluice.domain.states import JobKind, Unanswered
from sluice.domain.workflows import Workflow
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.engine.queue.jobs import JobWorker
from sluice.engine.runs.executor import Executor, StoredRun
from sluice.engine.state.broker import Ended, Settlement
from sluice.runtime.protocol import Response
from sluice.storage import jobs
from sluice.storage.jobs import NewJob

log = logging.getLogger(__name__)


@dataclass
class ClientRun:
    """What a waiting client gets: the run's first ``$.respond`` or why there is none, and the
    run as stored (None when nothing was: the workflow was deleted while it ran, or the run
    could not finish and was queued to run again)."""

    answer: Settlement
    run: Run | None = None


class _Acknowledged:
    """The job stored for an immediate ``$.respond`` (at most one per run)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[jobs.Job] | None = None

    async def job(self) -> jobs.Job | None:
        if self.task is None:
            return None
        return await self.task


class ClientRuns:
    def __init__(self, executor: Executor, enqueuer: Enqueuer, worker: JobWorker) -> None:
        self.executor = executor
        self.enqueuer = enqueuer
        self.worker = worker

    async def run(
        self,
        workflow: Workflow,
        event: Any,
        *,
        source_type: str,
        answer: asyncio.Future[Settlement] | None = None,
        run_id: str | None = None,
        replay_of: str | None = None,
    ) -> ClientRun:
        """Run ``workflow`` on ``event`` now and store it. ``answer`` (an HTTP client's) is
        settled with an immediate ``$.respond`` as soon as its job is stored; the result holds
        the answer for the end of the run."""
        run_id = run_id or ids.random_token(27)
        payload = WorkflowJob(event, source_type, run_id, replay_of).to_json()
        acked = _Acknowledged()
        held: list[Response] = []

        def on_respond(response: Response) -> None:
            held.append(response)  # the first one answers at the end, if not before
            if response.immediate and answer is not None and acked.task is None:
                acked.task = asyncio.create_task(
                    self._acknowledge(workflow, payload, response, answer)
                )

        async with self.worker.slot(workflow.owner_id):
            try:
                outcome = await self.executor.execute(
                    workflow,
                    event,
                    source_type=source_type,
                    run_id=run_id,
                    replay_of=replay_of,
                    on_respond=on_respond,
                    before_commit=acked.job,
                    mark_done=lambda conn: self._done(conn, acked),
                )
            except Exception as exc:
                return ClientRun(await self._again(workflow, payload, acked, exc))
            except asyncio.CancelledError:  # shutting down: an acknowledged run goes back
                if acked.task is not None and acked.task.done() and not acked.task.exception():
                    job = acked.task.result()
                    self.worker.leases.drop(job.id)
                    await asyncio.shield(self.worker.leases.release([job]))
                raise
        if acked.task is not None:
            self.worker.leases.drop((await acked.task).id)
        return ClientRun(_ended(outcome, held), outcome.run)

    async def _acknowledge(
        self,
        workflow: Workflow,
        payload: dict[str, Any],
        response: Response,
        answer: asyncio.Future[Settlement],
    ) -> jobs.Job:
        """Store the run's job, held by this worker, then answer the client."""
        lease_ms = self.worker.leases.hold_ms
        new = NewJob(
            JobKind.WORKFLOW, workflow.owner_id, workflow.id, payload,
            held_by=self.worker.worker_id, lease_ms=lease_ms,
        )  # fmt: skip
        job_id = await self.enqueuer.enqueue(new)
        assert job_id is not None
        job = jobs.Job(job_id, new.kind, new.owner_id, new.target_id, payload, 1, 0, claim=1)
        self.worker.leases.hold(job)
        if not answer.done():
            answer.set_result(response)
        return job

    def _done(self, conn: Any, acked: _Acknowledged) -> None:
        """In the run's transaction: its acknowledged job, if any, is done."""
        if acked.task is not None and acked.task.done() and not acked.task.exception():
            job = acked.task.result()
            if not jobs.complete_sync(conn, job, now_ms=self.worker.clock.now_ms()):
                raise errors.LeaseLost(details={"job_id": job.id})

    async def _again(
        self, workflow: Workflow, payload: dict[str, Any], acked: _Acknowledged, exc: Exception
    ) -> Settlement:
        """The run could not finish: its job (stored now, or the acknowledged one) runs again
        on the job worker; the client is told why."""
        crashed = isinstance(exc, errors.RunnerCrashed)
        if not crashed:
            log.error("a workflow run for a waiting client failed: %s", exc, exc_info=exc)
        job = None
        with contextlib.suppress(Exception):
            job = await acked.job()
        if job is not None:
            await self.worker.failed(job, exc)
            self.worker.leases.drop(job.id)
        else:
            again = NewJob(JobKind.WORKFLOW, workflow.owner_id, workflow.id, payload)
            await self.enqueuer.enqueue(again)
            self.worker.notify()
        if crashed:
            return Ended(
                "the workflow's runner crashed before $.respond(); it will run again",
                Unanswered.RUNNER_CRASHED,
            )
        return Ended("the run could not finish; it will run again", Unanswered.RETRYING)


def _ended(outcome: StoredRun, held: list[Response]) -> Settlement:
    """The answer at the end of a run: its first ``$.respond``, else why there is none."""
    if held:
        return held[0]
    run = outcome.run
    if run is not None and run.error is not None:
        error = run.error
        return Ended(
            f"the workflow failed in step {error.get('step_name')} before $.respond(): "
            f"{error['code']}: {error['msg']}",
            Unanswered.WORKFLOW_FAILED,
        )
    return Ended("No $.respond called in workflow", Unanswered.NO_WORKFLOW_RESPONSE)
