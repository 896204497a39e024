"""``http`` jobs: a source behind an HTTP endpoint, run on the request its endpoint stored.

The event is built here from the request as it came (``http_events.event_of``). A waiting
client (``customResponse``) gets the first ``respond()``, else an ``Ended`` saying why none
came. Without ``customResponse`` the client was answered at once, and the run gets the short
HTTP source time-out (``SLUICE_HTTP_SOURCE_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

from sluice import errors
from sluice.domain import http_events
from sluice.engine.broker import Ended, Waiters
from sluice.engine.invoker import Invoker
from sluice.engine.jobs import Finish
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
        error = outcome.result.error or {}
        if error.get("code") == protocol.TIMEOUT:
            message = "the source's run() timed out without calling respond()"
        elif error:
            name = error.get("name") or "an error"
            message = f"the source's run() threw {name} before calling respond(); see its logs"
        else:
            message = "the source's run() ended without calling respond()"
        settle(job.id, Ended(message))
