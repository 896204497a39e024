"""``http`` jobs: a source behind an HTTP endpoint, run on the request its endpoint stored.

The event is built here from the request as it came (``http_events.event_of``). A waiting
client (``customResponse``) gets the first ``respond()``, else an ``Ended`` saying why none
came. Without ``customResponse`` the client was answered at once, and the run gets the short
HTTP source time-out (``SLUICE_HTTP_SOURCE_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sluice import errors
from sluice.domain import http_events
from sluice.engine.queue.jobs import Finish, FinishMany
from sluice.engine.runs.invoker import BatchRun, Invoker
from sluice.engine.state.broker import Ended, Waiters
from sluice.runtime import protocol
from sluice.storage import database, sources
from sluice.storage.jobs import Job


class HttpJobs:
    def __init__(
        self,
        reader: database.Reader,
        invoker: Invoker,
        waiters: Waiters,
        *,
        run_timeout_seconds: float = 0.0,
    ) -> None:
        self.reader = reader
        self.invoker = invoker
        self.waiters = waiters
        #: The run of a source without ``customResponse``; 0: the source time-out.
        self.run_timeout_seconds = run_timeout_seconds

    async def __call__(self, job: Job, finish: Finish) -> None:
        """Run the source on the stored event; its results and "done" commit together."""
        settle = self.waiters.settle
        found = await self.reader(
            lambda conn: sources.get_with_state(conn, job.owner_id, job.target_id)
        )
        if found is None or not found[0].active:
            # Deleted or deactivated after the request was accepted: nothing to run.
            settle(job.id, Ended("the source was deleted or deactivated before it ran"))
            return
        deployment, snapshot = found
        timeout_s = None
        if self.run_timeout_seconds > 0:
            # Its client was answered at once: its run gets the HTTP source time-out. A
            # customResponse source's client waits for it, up to the response time-out.
            component = await self.invoker.components.by_id(deployment.component_id)
            if not http_events.custom_response(component.configurable_props):
                timeout_s = self.run_timeout_seconds
        try:
            outcome = await self.invoker.invoke(
                deployment,
                {"kind": "run", "event": http_events.event_of(job.payload)},
                on_respond=lambda response: settle(job.id, response),
                snapshot=snapshot,
                mark_done=finish,
                timeout_seconds=timeout_s,
            )
        except errors.RunnerCrashed:
            # The crash is Sluice's, not the source's: the job runs again (with backoff).
            settle(job.id, Ended("the source's runner crashed before respond(); it will run again"))
            raise
        settle(job.id, Ended(_unanswered(outcome.result.error)))

    async def run_batch(
        self, batch: Sequence[tuple[Job, Finish]], finish_many: FinishMany
    ) -> list[Exception | None]:
        """The batch path (``JobWorker``): many ``http`` jobs of one source, claimed together,
        run with one read of the source and one runner message, stored in one transaction
        (``Invoker.run_many``). Each job's place in the answer: None when its results and done
        mark were stored, else the exception that fails it alone (``errors.LeaseLost``: fenced;
        its retry path otherwise). A runner crash raises: every job of the batch runs again."""
        settle = self.waiters.settle
        first = batch[0][0]
        found = await self.reader(
            lambda conn: sources.get_with_state(conn, first.owner_id, first.target_id)
        )
        if found is None or not found[0].active:
            for job, _finish in batch:
                settle(job.id, Ended("the source was deleted or deactivated before it ran"))
            return [None] * len(batch)
        deployment, snapshot = found
        timeout_s = None
        if self.run_timeout_seconds > 0:
            component = await self.invoker.components.by_id(deployment.component_id)
            if not http_events.custom_response(component.configurable_props):
                timeout_s = self.run_timeout_seconds
        runs = [
            BatchRun(
                http_events.event_of(job.payload),
                finish,
                functools.partial(settle, job.id),
            )
            for job, finish in batch
        ]
        try:
            outcomes = await self.invoker.run_many(
                deployment,
                runs,
                snapshot=snapshot,
                timeout_seconds=timeout_s,
                finish_many=finish_many,
            )
        except errors.RunnerCrashed:
            for job, _finish in batch:
                settle(
                    job.id,
                    Ended("the source's runner crashed before respond(); it will run again"),
                )
            raise
        answers: list[Exception | None] = []
        for (job, _finish), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Exception):
                answers.append(outcome)  # its waiting client hears its next run, as alone
                continue
            settle(job.id, Ended(_unanswered(outcome.result.error)))
            answers.append(None)
        return answers


def _unanswered(error: dict[str, Any] | None) -> str:
    """Why a waiting client got no ``respond()`` from the run."""
    if error and error.get("code") == protocol.TIMEOUT:
        return "the source's run() timed out without calling respond()"
    if error:
        name = error.get("name") or "an error"
        return f"the source's run() threw {name} before calling respond(); see its logs"
    return "the source's run() ended without calling respond()"
