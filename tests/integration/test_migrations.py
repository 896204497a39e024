"""The migrations build exactly the schema tables.py describes, on both dialects; and a database
made at an earlier revision, filled, then upgraded keeps (and converts) its rows."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.platform import Platform
from sluice.storage import database
from sluice.storage.tables import metadata
from tests.conftest import SKIP_PG, _create_pg_database, _drop_pg_database


@pytest_asyncio.fixture(params=["sqlite", "postgresql"], loop_scope="session")
async def engine(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    """An empty database of each dialect (SQLite in ``tmp_path``, a new PostgreSQL database
    dropped after), for a test to migrate ``to`` an old revision, fill, and upgrade."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    if request.param == "postgresql":
        if SKIP_PG:
            pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
        url = await _create_pg_database()
    engine = database.create_engine(url)
    try:
        yield engine
    finally:
        await engine.dispose()
        if request.param == "postgresql":
            await _drop_pg_database(url)


def to(revision: str) -> Callable[[Any], None]:
    """For ``run_sync``: upgrade the connection's database to ``revision``."""

    def run(sync_conn: Any) -> None:
        command.upgrade(database.alembic_config(sync_conn), revision)

    return run


def test_head_is_alembics_head_and_each_file_is_named_by_its_revision() -> None:
    """``database.HEAD`` (what a start compares the database with before loading Alembic) is
    read from the file names: they must start with their revision ids."""
    scripts = ScriptDirectory(str(database.MIGRATIONS))
    assert scripts.get_heads() == [database.HEAD]
    for script in scripts.walk_revisions():
        assert script.path is not None
        assert Path(script.path).name.startswith(script.revision + "_"), script.path


async def test_a_database_at_an_earlier_revision_is_upgraded_at_start(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(to("0023"))
    await database.migrate(engine)
    async with engine.connect() as conn:
        version = (await conn.execute(sa.text("SELECT version_num FROM alembic_version"))).all()
    assert version == [(database.HEAD,)]


_START = """
import asyncio, sys
from sluice.storage import database
async def main():
    engine = database.create_engine(sys.argv[1])
    await database.migrate(engine)
    await engine.dispose()
asyncio.run(main())
print(sorted(m for m in sys.modules if m == "alembic" or m.startswith("alembic.")))
"""


async def test_a_start_on_a_database_at_head_does_not_load_alembic(tmp_path: Path) -> None:
    """In a process of its own: the first start migrates (Alembic loaded), the next finds the
    database at ``HEAD`` and leaves Alembic unloaded."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    starts = [
        subprocess.run(
            [sys.executable, "-c", _START, url], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    assert starts[0] != "[]"
    assert starts[1] == "[]"


async def test_migrations_match_the_tables(platform: Platform) -> None:
    def diff(sync_conn: Any) -> list[Any]:
        context = MigrationContext.configure(sync_conn, opts={"compare_type": False})
        return list(compare_metadata(context, metadata))

    async with platform.db.connect() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


async def test_accounts_from_before_workflows_get_an_error_workflow(
    engine: AsyncEngine,
) -> None:
    """Upgrading a database made at revision 0002: its accounts get their global error
    workflow, as accounts created since do."""

    async with engine.begin() as conn:
        await conn.run_sync(to("0002"))
        await conn.execute(
            sa.text(
                "INSERT INTO accounts (id, username, email, is_admin, created_at) "
                "VALUES ('u_old', 'old', 'old@example.com', false, 1)"
            )
        )
    async with engine.begin() as conn:
        await conn.run_sync(to("head"))
        row = (
            await conn.execute(
                sa.text(
                    "SELECT a.error_workflow_id, w.name, w.steps FROM accounts a "
                    "JOIN workflows w ON w.id = a.error_workflow_id WHERE a.id = 'u_old'"
                )
            )
        ).one()
    assert row.error_workflow_id.startswith("p_")
    assert row.name == "Global error workflow" and "email" in str(row.steps)


async def test_the_default_error_step_of_an_earlier_sluice_is_upgraded(
    engine: AsyncEngine,
) -> None:
    """0017: an unedited default error step gets the code whose e-mail links to the UI; a
    step the account edited is kept."""
    import json

    from sluice.domain import default_error_workflow

    (old_hash,) = default_error_workflow.PREVIOUS_CODE_HASHES
    default = {"id": "c_1", "name": "email", "type": "code", "code": "// old",
               "entry_path": "error-email.mjs", "code_hash": old_hash, "props": {}}  # fmt: skip
    edited = {**default, "id": "c_2", "code": "// mine", "code_hash": "f" * 64}

    async with engine.begin() as conn:
        await conn.run_sync(to("0016"))
        await conn.execute(
            sa.text(
                "INSERT INTO accounts (id, username, is_admin, created_at) "
                "VALUES ('u_old', 'old', false, 1)"
            )
        )
        for wid, step in (("p_default", default), ("p_edited", edited)):
            await conn.execute(
                sa.text(
                    "INSERT INTO workflows (id, owner_id, name, active, trigger, steps, "
                    "deployment_id, created_at, updated_at) VALUES (:id, 'u_old', 'w', true,"
                    " :trigger, :steps, 'd_old', 1, 1)"
                ),
                {"id": wid, "trigger": '{"type": "manual"}', "steps": json.dumps([step])},
            )
    async with engine.begin() as conn:
        await conn.run_sync(to("head"))
        rows = {
            r.id: r
            for r in await conn.execute(sa.text("SELECT id, steps, deployment_id FROM workflows"))
        }

    def steps(raw: Any) -> Any:
        return json.loads(raw) if isinstance(raw, str) else raw

    (upgraded,) = steps(rows["p_default"].steps)
    assert upgraded["code"] == default_error_workflow.STEP_CODE and upgraded["id"] == "c_1"
    assert upgraded["code_hash"] == default_error_workflow.DEFAULT_CODE_HASH
    assert rows["p_default"].deployment_id != "d_old"
    assert steps(rows["p_edited"].steps) == [edited]
    assert rows["p_edited"].deployment_id == "d_old"


async def test_webhook_jobs_become_deliveries(engine: AsyncEngine) -> None:
    """0016: the emit jobs to webhooks still queued, or failed after their 5 attempts, become
    deliveries (pending, dead) with their event; the other jobs stay."""
    import json

    async with engine.begin() as conn:
        await conn.run_sync(to("0015"))
        await conn.execute(
            sa.text(
                "INSERT INTO accounts (id, username, is_admin, created_at) "
                "VALUES ('u_old', 'old', false, 1)"
            )
        )
        await conn.execute(
            sa.text(
                "INSERT INTO webhooks (id, owner_id, url, active, created_at, updated_at) "
                "VALUES ('wh_old', 'u_old', 'https://example.com/in', true, 1, 1)"
            )
        )
        jobs = [
            ("emit", "wh_old", "queued", 2, {"event_id": "1-0", "event": {"n": 1}}),
            ("emit", "wh_old", "failed", 5, {"event_id": "2-0", "event": {"n": 2}}),
            ("emit", "wh_old", "done", 1, {"event_id": "3-0", "event": {"n": 3}}),
            ("emit", "p_workflow", "queued", 0, {"event_id": "4-0", "event": {"n": 4}}),
        ]
        for kind, target, status, attempts, payload in jobs:
            await conn.execute(
                sa.text(
                    "INSERT INTO jobs (kind, owner_id, target_id, payload, status, attempts,"
                    " run_after_ms, created_ms, last_error) VALUES (:kind, 'u_old', :target,"
                    " :payload, :status, :attempts, 5000, 1000, :error)"
                ),
                {"kind": kind, "target": target, "payload": json.dumps(payload),
                 "status": status, "attempts": attempts, "error": "the URL answered 503"},
            )  # fmt: skip
    async with engine.begin() as conn:
        await conn.run_sync(to("head"))
        moved = (
            await conn.execute(
                sa.text(
                    "SELECT id, webhook_id, status, attempts, claims, next_ms, since_ms,"
                    " finished_ms, last_error, payload FROM deliveries ORDER BY status"
                )
            )
        ).all()
        left = (await conn.execute(sa.text("SELECT target_id, status FROM jobs"))).all()
    dead, pending = moved
    for row in moved:
        assert row.id.startswith("dlv_") and row.webhook_id == "wh_old"
        assert row.since_ms == 1000 and row.last_error == "the URL answered 503"
        assert row.claims == row.attempts
    payload = pending.payload if isinstance(pending.payload, dict) else json.loads(pending.payload)
    assert (pending.status, pending.attempts, pending.next_ms) == ("pending", 2, 5000)
    assert payload["event"] == {"n": 1} and pending.finished_ms is None
    assert (dead.status, dead.attempts, dead.finished_ms) == ("dead", 5, 5000)
    assert sorted(left) == [("p_workflow", "queued"), ("wh_old", "done")]


async def test_timers_get_their_kind_from_their_targets_id(engine: AsyncEngine) -> None:
    """0024: a timer says what it ticks for; existing ones get it from their target's id."""

    async with engine.begin() as conn:
        await conn.run_sync(to("0023"))
        for target in ("p_flow", "dc_source", "dc_p_lookalike"):
            await conn.execute(
                sa.text(
                    "INSERT INTO timers (deployment_id, owner_id, interval_seconds,"
                    " next_run_ms) VALUES (:target, 'u_old', 60, 1000)"
                ),
                {"target": target},
            )
    async with engine.begin() as conn:
        await conn.run_sync(to("head"))
        kinds = dict((await conn.execute(sa.text("SELECT deployment_id, kind FROM timers"))).all())
    assert kinds == {"p_flow": "workflow", "dc_source": "source", "dc_p_lookalike": "source"}
