"""The migrations build exactly the schema tables.py describes, on both dialects."""

from __future__ import annotations

from typing import Any

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
