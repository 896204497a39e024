"""A job worker's slots, and each account's share of them (``domain/shares.py``).

Every run takes one of the worker's ``concurrency`` slots, after one of its account's
``share`` slots (when there is a share): a job's run (``JobWorker``), and a run without a job
for a waiting client (``engine/client_runs.py``). A run is counted against its account from
the moment it is handed over (``count``), not when it starts, so the worker sees the account's
count when it picks the next job.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

from sluice.domain import shares


class Slots:
    def __init__(self, concurrency: int, account_share: int) -> None:
        self.share = shares.effective(account_share, concurrency)
        self._slots = asyncio.Semaphore(concurrency)
        #: Runs of each account counted and not ended (running or waiting for a slot).
        self.busy: collections.Counter[str] = collections.Counter()
        #: Each busy account's slots (``share`` of them), when there is a share.
        self._gates: dict[str, asyncio.Semaphore] = {}

    def count(self, owner_id: str) -> asyncio.Semaphore | None:
        """Count one more run of the account; its gate (its share of the slots), if any."""
        self.busy[owner_id] += 1
        if not self.share:
            return None
        gate = self._gates.get(owner_id)
        if gate is None:
            gate = self._gates[owner_id] = asyncio.Semaphore(self.share)
        return gate

    def uncount(self, owner_id: str) -> None:
        self.busy[owner_id] -= 1
        if self.busy[owner_id] <= 0:
            del self.busy[owner_id]
            self._gates.pop(owner_id, None)

    def full(self) -> tuple[str, ...]:
        """The accounts at their share (a claim leaves their jobs queued)."""
        return tuple(sorted(shares.full(self.busy, self.share)))

    def worker_slot(self) -> asyncio.Semaphore:
        """One of the worker's slots (after the account's gate, for a counted run)."""
        return self._slots

    @contextlib.asynccontextmanager
    async def slot(self, owner_id: str) -> AsyncIterator[None]:
        """A run counted, then holding its account's slot and one of the worker's."""
        gate = self.count(owner_id)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if gate is not None:
                    await stack.enter_async_context(gate)
                await stack.enter_async_context(self._slots)
                yield
        finally:
            self.uncount(owner_id)
