"""``emit`` jobs: one stored event (an emit, or a ``$errors`` event) delivered to one
listener, a source or a workflow (``p_``).

Enqueued in the transaction that stores the event (``deliveries.enqueue_sync`` for sources'
emits, ``Executor`` for workflows' errors and emits). The listener's run is marked done in the
transaction that stores its own results. At least once: a crashed runner or a dead process
runs the delivery again; deliveries of several events to one listener may run concurrently,
so their order is not guaranteed.
"""

from __future__ import annotations

import logging

from sluice.engine.executor import Executor
from sluice.engine.invoker import Invoker
from sluice.engine.jobs import Finish, Retry
from sluice.runtime import protocol
from sluice.storage import sources
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)


class EmitJobs:
    def __init__(self, invoker: Invoker, executor: Executor) -> None:
        self.invoker = invoker
        self.executor = executor

    async def __call__(self, job: Job, finish: Finish) -> None:
        if job.target_id.startswith("p_"):
            ran = await self.executor.handle_delivery(job, finish)
            if ran is not None and ran.crashed:
                raise Retry(f"the runner crashed delivering to {job.target_id}")
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
        outcome = await self.invoker.invoke(
            listener, {"kind": "run", "event": payload.get("event")}, also=finish
        )
        error = outcome.result.error or {}
        if error.get("code") == protocol.RUNNER_CRASHED:
            # Sluice's failure, not the listener's: run the delivery again later.
            raise Retry(f"the runner crashed delivering {payload.get('event_id')}")
