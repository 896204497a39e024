"""Runs of one source stored in one group commit (``database.GroupWriter``): the source's row,
its subscribers and its last event position are read once for the group (``database.memo``),
and each run still sees the dedupe state and the positions the runs before it left."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.domain.outcomes import SourceResults
from sluice.domain.runs import Run
from sluice.platform import Platform
from sluice.storage import database, events, jobs
from tests.conftest import Api
from tests.integration.test_subscriptions import LISTENER, deploy, subscribe

DEDUPED = """
export default {
  name: "Deduped",
  version: "0.0.1",
  dedupe: "unique",
  async run(event) { this.$emit(event, { id: event.id }); },
};
"""


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement any engine sends while the test runs."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", note)


async def test_a_memo_lives_as_long_as_its_transaction(platform: Platform) -> None:
    writer = database.Writer(platform.db)
    try:

        def first(conn: sa.Connection) -> bool:
            database.memo(conn)["k"] = 1
            return database.memo(conn) == {"k": 1}

        assert await writer(first)
        assert await writer(lambda conn: database.memo(conn) == {})
    finally:
        writer.dispose()


def results(invocation: str, ids: list[str]) -> SourceResults:
    emits = [{"event": {"id": i}, "meta": {"id": i}} for i in ids]
    return SourceResults(invocation, emits, {}, [], [], None)


async def test_runs_of_one_source_in_one_group_commit(
    api: Api, platform: Platform, statements: list[str]
) -> None:
    source_id = await deploy(api, DEDUPED, "deduped")
    listener_id = await deploy(api, LISTENER, "listener")
    await subscribe(api, source_id, listener_id)
    deployment = await platform.sources.get(api.account_id, source_id)
    batches = [["a", "b"], ["b", "c"], ["a", "d"]]
    statements.clear()
    stored = await asyncio.gather(
        *(
            platform.commit.source(deployment, "unique", results(f"inv{n}", ids), None)
            for n, ids in enumerate(batches)
        )
    )
    # One group: the row (locked on PostgreSQL) and the subscribers read once for the three.
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert sum("FROM deployed_components" in s for s in reads) == 1, reads
    assert sum("FROM subscriptions" in s for s in reads) == 1, reads
    assert sum("FROM events" in s for s in reads) == 1, reads  # the last position
    # Each run deduped against the ids the runs before it in the group stored.
    assert [[item[1]["id"] for item in s.items] for s in stored if s] == [["a", "b"], ["c"], ["d"]]
    async with platform.db.connect() as conn:
        page = await events.page(conn, source_id, limit=10)
    assert sorted(e.payload["id"] for e in page.items) == ["a", "b", "c", "d"]
    # In commit order, each after the one before: the positions went on across the runs.
    ids = [event_id for s in stored if s for event_id in s.event_ids]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [e.id for e in sorted(page.items, key=lambda e: e.position)] == ids
    # Every stored event has its delivery to the listener, queued in the same commit.
    async with platform.db.connect() as conn:
        assert await jobs.counts(conn, listener_id) == {"queued": 4}
    await platform.jobs.drain()


async def test_work_at_a_transactions_end_runs_once_before_it_commits(platform: Platform) -> None:
    writer = database.Writer(platform.db)
    grouped = database.GroupWriter(writer)
    ran: list[tuple[str, Any]] = []

    def work(n: int) -> Any:
        def transaction(conn: sa.Connection) -> bool:
            database.memo(conn).setdefault("seen", []).append(n)
            # The first registration under a key is kept: the end runs once for the group.
            return database.at_end(
                conn, "k", lambda c: ran.append(("end", list(database.memo(c)["seen"])))
            )

        return transaction

    try:
        assert await asyncio.gather(*(grouped(work(n)) for n in range(3))) == [True] * 3
        assert ran == [("end", [0, 1, 2])]  # after every function of the group
        # Outside a Writer's transaction nothing is registered: the caller does its work now.
        async with platform.db.begin() as conn:
            assert not await conn.run_sync(lambda c: database.at_end(c, "k", ran.append))
        assert len(ran) == 1
    finally:
        writer.dispose()


async def test_a_group_of_workflow_runs_is_one_insert_and_one_charge(
    api: Api, platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sluice.engine.state import quotas
    from sluice.storage import runs as runs_store
    from sluice.storage import usage
    from tests.integration.test_workflows import DOUBLE, create

    assert platform.commit.quota.enabled
    workflow = await create(api, [DOUBLE])

    runs = [_run(api, workflow, f"r{n}") for n in range(3)]
    async with platform.db.connect() as conn:
        before, _ = await conn.run_sync(lambda c: usage.read_sync(c, api.account_id))
    charges: list[int] = []
    add = usage.add_sync

    def counted(conn: Any, owner_id: str, n: int, now_ms: int) -> int:
        charges.append(n)
        return add(conn, owner_id, n, now_ms)

    monkeypatch.setattr(quotas.usage, "add_sync", counted)
    inserted: list[list[str]] = []
    insert_rows = runs_store._insert_rows

    def insert_counted(conn: Any, rows: list[Run]) -> None:
        inserted.append([r.id for r in rows])
        insert_rows(conn, rows)

    monkeypatch.setattr(runs_store, "_insert_rows", insert_counted)
    stored = await asyncio.gather(
        *(
            platform.commit.run(r, global_errors=False, db_writes={}, hops=(), mark_done=None)
            for r in runs
        )
    )
    assert stored == [True, True, True]
    assert len(charges) == 1, charges  # one group, one charge (a statement each before)
    assert inserted == [[r.id for r in runs]]  # and one insert of its runs, in order
    listed = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert sorted(r["id"] for r in listed) == sorted(r.id for r in runs)
    async with platform.db.connect() as conn:
        after, _ = await conn.run_sync(lambda c: usage.read_sync(c, api.account_id))
    sizes = sum(quotas.size_of(r.event, r.context, r.steps, r.error) for r in runs)
    assert after - before == sizes


async def test_a_groups_runs_count_for_the_run_retention(
    api: Api, platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trim sees the group's own runs (inserted together at the end of its work)."""
    import dataclasses

    from tests.integration.test_workflows import DOUBLE, create

    monkeypatch.setattr(
        platform.commit, "settings", dataclasses.replace(platform.commit.settings, run_retention=2)
    )
    workflow = await create(api, [DOUBLE])

    runs = [_run(api, workflow, f"t{n}") for n in range(4)]
    stored = await asyncio.gather(
        *(
            platform.commit.run(r, global_errors=False, db_writes={}, hops=(), mark_done=None)
            for r in runs
        )
    )
    assert stored == [True] * 4
    listed = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert sorted(r["id"] for r in listed) == sorted(r.id for r in runs[2:])  # the newest two


def _run(api: Api, workflow: dict[str, Any], name: str) -> Run:
    """A successful run of ``workflow``, as its commit takes it (ids unique to the account)."""

    n = int(name[1:])
    return Run(
        f"{name}{api.account_id}", api.account_id, workflow["id"], workflow["deployment_id"],
        "success", {"n": n}, {"id": name}, [], None, None, None, 1_000 + n, 1.0, None,
    )  # fmt: skip
