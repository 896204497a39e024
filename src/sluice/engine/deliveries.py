"""Deliveries: a stored emit reaching the sources subscribed to its channel.

``enqueue_sync`` runs inside the transaction that stores the emits (``Invoker.persist``) and
adds one durable ``emit`` job per (listener, event): an emit is never stored without its deliveries.
``Deliveries.handle`` runs such a job: the listener's ``run(event)`` with the emitted payload,
marked done in the transaction that stores the listener's own results. At least once: a crashed
runner or a dead process runs the delivery again; deliveries of several events to one listener
may run concurrently, so their order is not guaranteed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from sluice.domain import routing
from sluice.domain.states import JobKind
from sluice.engine import broker
from sluice.engine.jobs import Finish, JobWorker, Retry
from sluice.runtime import protocol
from sluice.storage import jobs, sources, subscriptions
from sluice.storage.jobs import Job
from sluice.storage.sources import Deployment

if TYPE_CHECKING:  # the invoker calls ``enqueue``; only the handler needs the invoker
    from sluice.engine.executor import Executor
    from sluice.engine.invoker import Invoker

log = logging.getLogger(__name__)


def enqueue_sync(
    conn: Connection,
    emitter: Deployment,
    event_ids: list[str],
    items: list[tuple[str, Any, dict[str, Any]]],
    now_ms: int,
) -> int:
    """One ``emit`` job per subscribed listener of each stored event (``items`` are the
    events' ``(channel, payload, meta)``, in ``event_ids`` order); the number enqueued. A sync
    function of the persist transaction's connection (the inline SQLite writer, or
    ``run_sync`` on PostgreSQL), which also reads the subscriptions."""
    if not event_ids:
        return 0
    links = subscriptions.from_emitter(conn, emitter.owner_id, routing.emitter_patterns(emitter.id))
    count = 0
    for event_id, (channel, payload, _meta) in zip(event_ids, items, strict=True):
        for listener_id in routing.listeners(links, emitter.id, channel):
            jobs.enqueue_sync(
                conn,
                kind=JobKind.EMIT,
                owner_id=emitter.owner_id,
                target_id=listener_id,
                payload={
                    "event_id": event_id,
                    "emitter_id": emitter.id,
                    "channel": channel,
                    "event": payload,
                },
                now_ms=now_ms,
            )
            count += 1
    return count


class Deliveries:
    """The ``emit`` job handler. ``install()`` registers it with the worker and wakes the
    worker whenever this process enqueues deliveries (rather than at its next poll)."""

    def __init__(
        self, invoker: Invoker, worker: JobWorker, workflows: Executor | None = None
    ) -> None:
        self.invoker = invoker
        self.worker = worker
        #: Runs deliveries whose listener is a workflow (``p_``).
        self.workflows = workflows

    def install(self) -> None:
        self.worker.register(JobKind.EMIT, self.handle)
        self.invoker.broker.on(broker.JOBS, lambda _items: self.worker.notify())

    async def handle(self, job: Job, finish: Finish) -> None:
        if job.target_id.startswith("p_") and self.workflows is not None:
            ran = await self.workflows.handle_delivery(job, finish)
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
