"""The builder's Test runs (``Executor.test``), and the last result of each step's Test of a
deployed workflow, kept so the builder shows it again when opened (as Pipedream's does). Kept
apart from runs: never in the workflow's runs, its ``$errors`` or the run pages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import Clock
from sluice.domain.runs import Run
from sluice.domain.workflows import Workflow
from sluice.engine.runs.executor import Executor
from sluice.engine.state.commit import Commit
from sluice.storage import step_tests as store


@dataclass(frozen=True)
class KeptTest:
    """A step's last test: what the builder shows (``result``: status, duration_ms, steps,
    response, flow_exit, pause and the count of ``$.send`` calls) and when it ran."""

    result: dict[str, Any]
    tested_ms: int


def _result(run: Run) -> dict[str, Any]:
    return {
        "status": run.status,
        "duration_ms": run.duration_ms,
        "steps": run.steps,
        "response": run.response,
        "flow_exit": run.flow_exit,
        "pause": run.pause,
        "sends": len(run.sends),
    }


class StepTests:
    def __init__(self, db: AsyncEngine, executor: Executor, commit: Commit, clock: Clock) -> None:
        self.db = db
        self.executor = executor
        self.commit = commit
        self.clock = clock

    async def test(self, draft: Workflow, event: Any, *, keep: bool) -> Run:
        """Run ``draft`` (cut after the step tested) on ``event``; with ``keep`` (a deployed
        workflow's draft: same id), its result is kept as the last step's last test."""
        run = await self.executor.test(draft, event)
        if keep and draft.steps:
            name, now = str(draft.steps[-1]["name"]), self.clock.now_ms()
            result = _result(run)
            await self.commit.write(
                lambda c: store.put_sync(c, draft.owner_id, draft.id, name, result, now)
            )
        return run

    async def last(self, owner_id: str, workflow_id: str) -> dict[str, KeptTest]:
        """Each step's last kept test, by step name."""
        async with self.db.connect() as conn:
            found = await conn.run_sync(lambda c: store.of_workflow_sync(c, owner_id, workflow_id))
        return {name: KeptTest(result, ms) for name, (result, ms) in found.items()}
