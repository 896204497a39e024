"""``timer`` jobs: one tick of a timer source, or of a timer-triggered workflow (``TimerJob``).

The scheduler (``engine/queue/scheduler.py``) enqueues one job per due tick; here the tick runs. A
source or workflow deleted or deactivated since the tick was enqueued is skipped (the job is
done).
"""

from __future__ import annotations

from sluice.domain.jobs import Ticked, TimerJob
from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.executor import Executor
from sluice.engine.runs.invoker import Invoker
from sluice.storage import database, sources
from sluice.storage.jobs import Job


class TimerJobs:
    def __init__(self, reader: database.Reader, invoker: Invoker, executor: Executor) -> None:
        self.reader = reader
        self.invoker = invoker
        self.executor = executor

    async def __call__(self, job: Job, finish: Finish) -> None:
        owner_id, target_id = job.owner_id, job.target_id
        tick = TimerJob.of(job.payload, target_id)
        if tick.ticked is Ticked.WORKFLOW:
            workflow = await self.executor.load(owner_id, target_id)
            if workflow is None or not workflow.active:
                return
            await self.executor.execute(workflow, tick.event, source_type="TIMER", mark_done=finish)
            return
        found = await self.reader(lambda conn: sources.get_with_state(conn, owner_id, target_id))
        if found is None or not found[0].active:
            return
        deployment, snapshot = found
        await self.invoker.invoke(
            deployment, {"kind": "run", "event": tick.event}, snapshot=snapshot, mark_done=finish
        )
