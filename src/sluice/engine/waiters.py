"""Requests waiting in this process for their job's answer (``customResponse`` sources,
workflow endpoints, manual runs): one future per job id, settled by the job's handler.

The ingress registers a future at the commit of the request's job (before any worker can claim
it), the ``http`` and ``workflow`` handlers settle it with the first ``respond()`` or an
``Ended`` when the run ends without one; only the first outcome counts. Per process: a job run
by another process answers no one here (its request waits for its time-out).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sluice.domain.states import Unanswered
from sluice.runtime.protocol import Response


@dataclass(frozen=True)
class Ended:
    """The run ended, or could not start, without calling ``respond()``: why (its HTTP status
    is decided in ``api/errors.py``) and a message for the client."""

    message: str
    reason: Unanswered = Unanswered.NO_RESPONSE


Outcome = Response | Ended


class Waiters:
    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[Outcome]] = {}

    def add(self, job_id: int, future: asyncio.Future[Outcome]) -> None:
        self._futures[job_id] = future

    def discard(self, job_id: int) -> None:
        self._futures.pop(job_id, None)

    def settle(self, job_id: int, outcome: Outcome) -> None:
        """The first outcome answers the waiting request, if any (only the first counts)."""
        future = self._futures.get(job_id)
        if future is not None and not future.done():
            future.set_result(outcome)
