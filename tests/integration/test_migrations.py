"""The migrations build exactly the schema tables.py describes, on both dialects."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from sluice.platform import Platform
from sluice.storage.tables import metadata


async def test_migrations_match_the_tables(platform: Platform) -> None:
    def diff(sync_conn: Any) -> list[Any]:
        context = MigrationContext.configure(sync_conn, opts={"compare_type": False})
        return list(compare_metadata(context, metadata))

    async with platform.db.connect() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
async def test_accounts_from_before_workflows_get_an_error_workflow(
    tmp_path: Any, dialect: str
) -> None:
    """Upgrading a database made at revision 0002: its accounts get their global error
    workflow, as accounts created since do."""
    import sqlalchemy as sa
    from alembic import command

    from sluice.storage import database
    from tests.conftest import SKIP_PG, _create_pg_database, _drop_pg_database

    url = f"sqlite:///{tmp_path / 'old.db'}"
    if dialect == "postgresql":
        if SKIP_PG:
            pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
        url = await _create_pg_database()
    engine = database.create_engine(url)
    try:

        def to(revision: str) -> Any:
            def run(sync_conn: Any) -> None:
                cfg = database.alembic_config(sync_conn)
                command.upgrade(cfg, revision)

            return run

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
    finally:
        await engine.dispose()
        if dialect == "postgresql":
            await _drop_pg_database(url)
