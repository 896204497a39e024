"""A run's read of its workflow (``Workflows.current``) across processes: on SQLite a process
keeps the workflow it read while the change counter shared by the file's processes stands
still (no database read at all), and reads again as soon as another process has changed a
workflow; on PostgreSQL it reads the workflow's stamp every time, unless it hears the database's
pushed changes (``engine/notifications.PushedChanges``). Another process is another
``Workflows`` on the same database, with its own counter on the same file."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.clock import FakeClock
from sluice.engine.components import workflows as workflows_module
from sluice.engine.components.workflow_input import WorkflowInput
from sluice.engine.components.workflows import Workflows
from sluice.engine.notifications import Notifications
from sluice.platform import Platform
from sluice.storage import tables
from sluice.storage.change_counters import ChangeCounter
from tests.conftest import Api
from tests.integration.test_notifications import Moved
from tests.integration.test_workflows import step


def _process(
    platform: Platform, clock: FakeClock, reads: list[int], changes: Any = None
) -> Workflows:
    """A ``Workflows`` as another process has it, counting its database reads (on PostgreSQL
    with ``changes``, pushed ones; else none: it reads the stamp every time)."""

    async def reader(fn: Callable[[Any], Any]) -> Any:
        reads.append(1)
        return await platform.reader(fn)

    path = platform.reader.sqlite_path
    return Workflows(
        platform.db, platform.components, platform.cipher, platform.settings, clock,
        credentials=platform.credentials, reader=reader,  # type: ignore[arg-type]
        changes=ChangeCounter.beside(path, "workflow") if path is not None else changes,
    )  # fmt: skip


async def _created(api: Api, name: str) -> str:
    """A new webhook workflow's id, made over the API."""
    created = await api.client.post(
        "/v1/workflows",
        json={"name": name, "trigger": {"type": "http"}, "steps": [step("s", "run() {}")]},
    )
    workflow_id: str = created.json()["data"]["id"]
    return workflow_id


async def test_a_change_in_another_process_is_read_at_once(api: Api) -> None:
    platform = api.platform
    workflow_id = await _created(api, "read me")
    clock, reads = FakeClock(), []
    serving = _process(platform, clock, reads)
    first = await serving.current(api.account_id, workflow_id)
    assert first is not None and first.name == "read me"
    before = len(reads)
    assert await serving.current(api.account_id, workflow_id) == first
    sqlite = platform.reader.sqlite_path is not None
    # SQLite: nothing read while no process counted a change; PostgreSQL: the stamp.
    assert len(reads) - before == (0 if sqlite else 1)

    elsewhere = _process(platform, FakeClock(), [])
    await elsewhere.update(api.account_id, workflow_id, WorkflowInput(name="renamed", active=False))
    now = await serving.current(api.account_id, workflow_id)
    assert now is not None and (now.name, now.active) == ("renamed", False)
    # Through the platform's own Workflows (this process's API), likewise.
    await platform.workflows.update(api.account_id, workflow_id, WorkflowInput(active=True))
    again = await serving.current(api.account_id, workflow_id)
    assert again is not None and again.active is True
    await elsewhere.delete(api.account_id, workflow_id)
    assert await serving.current(api.account_id, workflow_id) is None


async def test_a_change_nobody_counted_is_read_within_the_recheck(api: Api) -> None:
    """A row changed with no count (a process that died between its commit and its count) is
    read once the copy is ``_RECHECK_MS`` old."""
    platform = api.platform
    workflow_id = await _created(api, "quiet")
    clock, reads = FakeClock(), []
    serving = _process(platform, clock, reads)
    read = await serving.current(api.account_id, workflow_id)
    assert read is not None and read.name == "quiet"
    async with platform.db.begin() as conn:
        await conn.execute(
            sa.update(tables.workflows)
            .where(tables.workflows.c.id == workflow_id)
            .values(name="uncounted", updated_at=tables.workflows.c.updated_at + 1)
        )
    seen = await serving.current(api.account_id, workflow_id)
    assert seen is not None
    # SQLite keeps its copy (nothing counted); PostgreSQL reads the stamp every time.
    assert seen.name == ("quiet" if platform.reader.sqlite_path is not None else "uncounted")
    clock.advance(ms=workflows_module._RECHECK_MS)
    later = await serving.current(api.account_id, workflow_id)
    assert later is not None and later.name == "uncounted"


async def test_a_run_of_a_workflow_deleted_while_it_ran_is_not_stored(api: Api) -> None:
    """The run's commit asks whether its workflow is still there (once per group commit, for
    the group's runs of one workflow): runs of two workflows committed together, one of them
    deleted meanwhile, store only the other's."""
    platform = api.platform
    kept, gone = await _created(api, "kept"), await _created(api, "gone")
    workflows = [await platform.workflows.get(api.account_id, i) for i in (kept, kept, gone)]
    assert (await api.client.delete(f"/v1/workflows/{gone}")).status_code == 200
    stored = await asyncio.gather(
        *(platform.executor.execute(w, {"n": 1}, source_type="TEST") for w in workflows)
    )
    assert [s.run is not None for s in stored] == [True, True, False]
    listed = (await api.client.get(f"/v1/workflows/{kept}/runs")).json()
    assert listed["page_info"]["total_count"] == 2


@pytest.mark.parametrize("platform", ["postgresql"], indirect=True)
async def test_on_postgresql_a_copy_is_kept_until_a_change_is_pushed(api: Api) -> None:
    """A process that hears the database's pushes (``PushedChanges``) reads nothing while no
    change was pushed, and reads the workflow again once one is; one that does not hear them
    (nothing listening) reads the stamp every time, as above."""
    platform = api.platform
    workflow_id = await _created(api, "pushed")
    changes = Moved()
    listener = Notifications(
        platform.settings.resolved_database_url, lambda *_: None, lambda _e: None, changes
    )
    listener.start()
    await asyncio.wait_for(listener.listening.wait(), 20)
    try:
        clock, reads = FakeClock(), []
        serving = _process(platform, clock, reads, changes)
        first = await serving.current(api.account_id, workflow_id)
        assert first is not None and first.name == "pushed"
        before = len(reads)
        assert await serving.current(api.account_id, workflow_id) == first
        assert len(reads) == before  # heard, nothing changed: no read at all
        changes.moved.clear()
        elsewhere = _process(platform, FakeClock(), [])
        await elsewhere.update(api.account_id, workflow_id, WorkflowInput(name="renamed"))
        await asyncio.wait_for(changes.moved.wait(), 20)  # the push, from the database
        now = await serving.current(api.account_id, workflow_id)
        assert now is not None and now.name == "renamed"
    finally:
        await listener.close()
    reads.clear()
    await serving.current(api.account_id, workflow_id)
    assert reads  # not heard any more: the stamp is read
