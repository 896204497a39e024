"""``emit`` jobs: one stored event (an emit, or a ``$errors`` event) delivered to one
listener, a source or a workflow: the whole of it is here, for both.

Enqueued in the transaction that stores the event (``engine/state/commit.py``: a source's
emits, a run's ``$errors`` event and its ``$.send.emit``), carrying ``domain/jobs.EmitJob``
(the listener's kind in it). The listener's run is marked done in the transaction that stores
its own results. At least once: a crashed runner or a dead process
runs the delivery again; deliveries of several events to one listener may run concurrently,
so their order is not guaranteed.
"""

from __future__ import annotations

import logging

from sluice.domain import states
from sluice.domain.jobs import EmitJob, Emitter, Listener
from sluice.engine.outbound.webhooks import Webhooks
from sluice.engine.queue.jobs import Finish
from sluice.engine.runs.executor import Executor
from sluice.engine.runs.invoker import Invoker
from sluice.storage import sources
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


class EmitJobs:
    def __init__(self, invoker: Invoker, executor: Executor, webhooks: Webhooks) -> None:
        self.invoker = invoker
        self.executor = executor
        self.webhooks = webhooks

    async def __call__(self, job: Job, finish: Finish) -> None:
        emit = EmitJob.of(job.payload, job.target_id)
        if emit.listener == Listener.WORKFLOW:
            await self._workflow(job, emit, finish)
        elif emit.listener == Listener.WEBHOOK:  # queued before deliveries had their own queue
            await self.webhooks.accept(job, finish)
        else:
            await self._source(job, emit, finish)

    async def _source(self, job: Job, emit: EmitJob, finish: Finish) -> None:
        async with self.invoker.db.connect() as conn:
            listener = await sources.get(conn, job.owner_id, job.target_id)
        if listener is None or not listener.active:
            log.info(
                "delivery skipped: the listener is gone or inactive",
                extra={"action": "delivery_skipped", "job_id": job.id, "listener": job.target_id},
            )
            return  # the worker marks the job done
        # A crashed runner raises RunnerCrashed: the job worker runs the delivery again.
        await self.invoker.invoke(
            listener,
            {"kind": "run", "event": emit.event},
            mark_done=finish,
            hops=list(emit.hops or ()),
        )

    async def _workflow(self, job: Job, emit: EmitJob, finish: Finish) -> None:
        """A workflow's run on the event: an error forwarded (``$errors``), or an event a
        source or a workflow emitted. Nothing runs for a workflow gone, inactive, or on the
        event's way already (never a loop)."""
        workflow = await self.executor.load(job.owner_id, job.target_id)
        hops = list(emit.hops or ())
        if workflow is None or not workflow.active or workflow.id in hops:
            return
        if emit.channel == states.ERRORS:
            source_type = "ERRORS"
        elif emit.emitted_by == Emitter.WORKFLOW:  # a workflow's $.send.emit
            source_type = "EMIT"
        else:
            source_type = "COMPONENT"
        await self.executor.execute(
            workflow,
            emit.event,
            source_type=source_type,
            mark_done=finish,
            hops=hops,
            trigger_context={"emitter_id": emit.emitter_id, "event_id": emit.event_id},
        )
