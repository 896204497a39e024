"""``workflow`` jobs: a workflow run on a stored event (its endpoint, a manual run, a replay).

A waiting HTTP client gets the first immediate ``$.respond``, else the first one when the run
ends, else 400 ``No $.respond called in workflow`` (Pipedream's answer).
"""

from __future__ import annotations

from sluice import errors
from sluice.domain.jobs import WorkflowJob
from sluice.domain.states import Unanswered
from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.executor import Executor
from sluice.engine.state.broker import Ended, Waiters
from sluice.runtime.protocol import Response
from sluice.storage.jobs import Job


class WorkflowJobs:
    def __init__(self, executor: Executor, waiters: Waiters) -> None:
        self.executor = executor
        self.waiters = waiters

    async def __call__(self, job: Job, finish: Finish) -> None:
        settle = self.waiters.settle
        asked = WorkflowJob.of(job.payload)
        workflow = await self.executor.load(job.owner_id, job.target_id)
        if workflow is None or not workflow.active:
            gone = "the workflow was deleted or deactivated before it ran"
            settle(job.id, Ended(gone, Unanswered.GONE))
            return
        held: list[Response] = []

        def on_respond(response: Response) -> None:
            if response.immediate:
                settle(job.id, response)
            else:
                held.append(response)

        try:
            outcome = await self.executor.execute(
                workflow,
                asked.event,
                source_type=asked.source_type,
                run_id=asked.run_id,
                replay_of=asked.replay_of,
                mark_done=finish,
                on_respond=on_respond,
            )
        except errors.RunnerCrashed:
            # The job is retried by the worker; a waiting client is answered now.
            crashed = "the workflow's runner crashed before $.respond(); it will run again"
            settle(job.id, Ended(crashed, Unanswered.RUNNER_CRASHED))
            raise
        except Exception:
            settle(
                job.id, Ended("the run could not finish; it will run again", Unanswered.RETRYING)
            )
            raise
        if held:
            settle(job.id, held[0])
            return
        run = outcome.run
        if run is not None and run.error is not None:
            error = run.error
            message = (
                f"the workflow failed in step {error.get('step_name')} before $.respond(): "
                f"{error['code']}: {error['msg']}"
            )
            settle(job.id, Ended(message, Unanswered.WORKFLOW_FAILED))
            return
        settle(job.id, Ended("No $.respond called in workflow", Unanswered.NO_WORKFLOW_RESPONSE))
