"""database.Reader: hot-path reads see every committed write, and never fail on a busy SQLite."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import sqlalchemy as sa

from sluice.platform import Platform
from sluice.storage import accounts, database
from sluice.storage.tables import accounts as accounts_table


def _username(conn: sa.Connection, account_id: str) -> str | None:
    return conn.execute(
        sa.select(accounts_table.c.username).where(accounts_table.c.id == account_id)
    ).scalar()


async def test_reads_see_writes_committed_just_before(platform: Platform) -> None:
    account, key = await platform.create_account("reader-a")
    assert await platform.reader(lambda c: _username(c, account.id)) == "reader-a"
    for name in ("reader-b", "reader-c"):
        async with platform.db.begin() as conn:
            await conn.execute(
                accounts_table.update()
                .where(accounts_table.c.id == account.id)
                .values(username=name)
            )
        assert await platform.reader(lambda c: _username(c, account.id)) == name
    found = await platform.reader(lambda c: accounts.authenticate(c, key))
    assert found is not None and found.username == "reader-c"


async def test_a_locked_sqlite_database_is_waited_for_in_a_thread(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    engine = await database.open_database(f"sqlite:///{path}")
    async with engine.begin() as conn:
        await accounts.create(conn, username="before", email=None, now_s=0)
    await engine.dispose()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE accounts SET username='after-lock'")
    engine = database.create_engine(f"sqlite:///{path}")
    reader = database.Reader(engine)
    read = sa.select(accounts_table.c.username)
    try:
        task = asyncio.create_task(reader(lambda c: c.execute(read).scalar()))
        await asyncio.sleep(0)  # the inline attempt met the lock; the read now waits in a thread
        assert not task.done()
        holder.execute("COMMIT")
        holder.execute("PRAGMA locking_mode=NORMAL")
        holder.execute("SELECT 1 FROM accounts LIMIT 1")  # releases the exclusive lock
        holder.close()
        assert await task == "after-lock"
    finally:
        reader.dispose()
        await engine.dispose()
