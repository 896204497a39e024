"""``emit`` jobs: one stored event (an emit, or a ``$errors`` event) delivered to one
listener, a source or a workflow (``p_``).

Enqueued in the transaction that stores the event (``engine/state/commit.py``, for
emits, ``Executor`` for workflows' errors and emits). The listener's run is marked done in the
transaction that stores its own results. At least once: a crashed runner or a dead process
runs the delivery again; deliveries of several events to one listener may run concurrently,
so their order is not guaranteed.
"""

from __future__ import annotations

import logging

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
        if job.target_id.startswith("p_"):
            await self.executor.handle_delivery(job, finish)
            return
        if job.target_id.startswith("wh_"):  # queued before deliveries had their own queue
            await self.webhooks.accept(job, finish)
            return
        async with self.invoker.db.connect() as conn:
            listener = await sources.get(conn, job.owner_id, job.target_id)
        if listener is None or not listener.active:
            log.info(
                "delivery skipped: the listener is gone or inactive",
                extra={"action": "delivery_skipped", "job_id": job.id, "listener": job.target_id},
            )
            return  # the worker marks the job done
        payload = job.payload or {}
        # The listeners the event went through: its emits never go back to one of them.
        hops = [str(h) for h in payload.get("hops") or []]
        # A crashed runner raises RunnerCrashed: the job worker runs the delivery again.
        await self.invoker.invoke(
            listener, {"kind": "run", "event": payload.get("event")}, mark_done=finish, hops=hops
        )
