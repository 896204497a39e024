"""A paused run that cannot be carried on ends cleanly: its workflow was deactivated or
deleted, or the paused step was removed, while it waited. Real Node, both dialects, a fake
clock (``tests/integration/test_flow.py``'s fixtures)."""

from __future__ import annotations

from typing import Any

from sluice.clock import FakeClock
from sluice.config import Settings
from sluice.storage import jobs
from tests.integration.test_flow import AFTER, code, opened, settings, setup

__all__ = ["settings"]

WAIT = code("wait", "return $.flow.delay(60000);")


async def paused(settings: Settings, clock: FakeClock) -> tuple[str, str, dict[str, Any]]:
    key, workflow_id = await setup(settings, clock, [WAIT, AFTER])
    async with opened(settings, clock, key) as s:
        run = await s.run(workflow_id, {"n": 1})
    assert run["status"] == "delayed", run
    return key, workflow_id, run


async def test_a_removed_step_ends_the_run_with_its_reason(settings: Settings) -> None:
    clock = FakeClock()
    key, workflow_id, run = await paused(settings, clock)
    async with opened(settings, clock, key) as s:
        # The step that paused the run is removed while the run waits.
        updated = await s.client.put(f"/v1/workflows/{workflow_id}", json={"steps": [AFTER]})
        assert updated.status_code == 200, updated.text
        clock.advance(seconds=61)
        assert await s.platform.jobs.drain() == 1
        done = await s.read(run["id"])
        assert await s.platform.jobs.drain() == 0  # nothing queued again, nothing retried
    assert done["status"] == "cancelled", done
    assert done["error"]["code"] == "STEP_REMOVED"
    assert (
        'step "wait"' in done["error"]["msg"]
        and "no longer in the workflow" in (done["error"]["msg"])
    )
    [step] = done["steps"]
    assert step["status"] == "cancelled"
    assert step["flow"] == {"kind": "delay", "outcome": "step_removed"}


async def test_a_deactivated_workflow_ends_the_run(settings: Settings) -> None:
    clock = FakeClock()
    key, workflow_id, run = await paused(settings, clock)
    async with opened(settings, clock, key) as s:
        off = await s.client.put(f"/v1/workflows/{workflow_id}", json={"active": False})
        assert off.status_code == 200, off.text
        clock.advance(seconds=61)
        assert await s.platform.jobs.drain() == 1
        done = await s.read(run["id"])
    assert done["status"] == "cancelled", done
    assert done["error"]["code"] == "WORKFLOW_INACTIVE"
    assert "deactivated" in done["error"]["msg"]
    assert done["steps"][0]["flow"]["outcome"] == "workflow_inactive"


async def test_a_deleted_workflow_takes_its_paused_run_with_it(settings: Settings) -> None:
    clock = FakeClock()
    key, workflow_id, run = await paused(settings, clock)
    cancel_url = run["steps"][0]["return_value"]["cancel_url"]
    async with opened(settings, clock, key) as s:
        deleted = await s.client.delete(f"/v1/workflows/{workflow_id}")
        assert deleted.status_code in (200, 204), deleted.text
        clock.advance(seconds=61)
        # The resume job runs once and ends done: no error, no retry.
        assert await s.platform.jobs.drain() == 1
        clock.advance(seconds=600)
        assert await s.platform.jobs.drain() == 0
        async with s.platform.db.connect() as conn:
            counts = await jobs.counts(conn)
        assert counts.get("failed", 0) == 0 and counts.get("queued", 0) == 0, counts
        gone = await s.client.get(f"/v1/runs/{run['id']}")
        assert gone.status_code == 404, gone.text
        assert (await s.call(cancel_url)).status_code == 404
