"""Paused runs (``$.flow.delay``, ``suspend``, ``rerun``): their resume and cancel URLs.

A step that pauses its run hands out ``{resume_url, cancel_url}``: URLs under
``SLUICE_PUBLIC_URL`` (``/flow/<run id>/resume/<secret>``, ``/flow/<run id>/cancel/<secret>``),
each secret 32 random characters, of which the run keeps only a sha256 (``domain/flow.py``).
Every pause has one ``resume`` job, due when the wait ends (``engine/state/commit.py`` stores it
with the run); calling a URL moves that job to now with what woke it (``signal``), so a run wakes
once, whichever comes first: its time, its resume URL or its cancel URL. The job worker's lease
then makes sure it is carried on once (``handlers/resume.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from sluice import errors, ids
from sluice.clock import Clock
from sluice.domain import flow
from sluice.domain.jobs import ResumeJob
from sluice.domain.runs import Run
from sluice.engine.state import broker
from sluice.engine.state.commit import Commit
from sluice.storage import pauses, runs

log = logging.getLogger(__name__)


@dataclass
class Resumed:
    """A paused run carried on: ``run`` as stored with its paused step settled
    (``domain.flow.resumed_steps``), the step to start at (None: cancelled, nothing runs) and
    that step's ``$.context.run``."""

    run: Run
    start: int | None
    context_run: dict[str, Any] | None = None

    def runs_of(self, steps: list[dict[str, Any]]) -> dict[str, int]:
        """``$.context.run.runs`` of the step it starts with, when it runs again."""
        if self.context_run is None or self.start is None:
            return {}
        return {steps[self.start]["id"]: int(self.context_run["runs"])}


@dataclass
class FlowUrls:
    """The resume and cancel URLs a step of one runner call may hand out, and their secrets."""

    resume_secret: str
    cancel_secret: str
    base: str

    @classmethod
    def new(cls, base: str) -> FlowUrls:
        """Fresh secrets (32 random base62 characters each) under ``base``: one draw for both
        (every run makes them, paused or not: a draw is a system call)."""
        both = ids.random_token(64)
        return cls(both[:32], both[32:], base)

    def call(self, run_id: str) -> dict[str, str]:
        return {
            "resume_url": f"{self.base}/flow/{run_id}/resume/{self.resume_secret}",
            "cancel_url": f"{self.base}/flow/{run_id}/cancel/{self.cancel_secret}",
        }


class Pauses:
    def __init__(self, commit: Commit, clock: Clock) -> None:
        #: The resume job is moved on the one writer (``engine/state/commit.py``).
        self.commit = commit
        self.clock = clock

    async def signal(self, run_id: str, action: flow.Action, secret: str, data: Any) -> str:
        """A resume or cancel URL was called: wake the run now with ``data`` (the request,
        ``$resume_data`` or ``callback_request``). Its status now (``resuming`` or
        ``cancelling``). Raises ``NotFound`` for a URL that is not a paused run's (wrong or
        used secret), ``Conflict`` when the run is already waking."""
        now_ms = self.clock.now_ms()

        def transaction(conn: Connection) -> str:
            run = runs.get_sync(conn, run_id)
            pause = flow.Pause.from_json(run.pause) if run is not None and run.pause else None
            stored = None
            if pause is not None:
                stored = pause.resume_hash if action == flow.Action.RESUME else pause.cancel_hash
            if pause is None or stored is None or not flow.matches(secret, stored):
                raise errors.NotFound("no paused run has this URL (it may have resumed already)")
            payload = ResumeJob(run_id, action, data).to_json()
            if (
                pause.woken is not None
                or pause.job_id is None
                or not pauses.wake_sync(conn, pause.job_id, payload, now_ms)
            ):
                raise errors.Conflict("the run is already being resumed or cancelled")
            pause.woken = str(action)
            runs.set_pause_sync(conn, run_id, pause.to_json())
            return "cancelling" if action == flow.Action.CANCEL else "resuming"

        status = await self.commit.write(transaction)
        self.commit.broker.publish(broker.JOBS, [1])  # wake the job worker
        log.info("run %s %s", run_id, status, extra={"action": "flow_signal", "run_id": run_id})
        return status
