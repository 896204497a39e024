"""Driver errors that mean the store is unavailable become one ``StorageUnavailable`` where they
enter (``storage/faults.py``), answered 503 with ``Retry-After``; other errors stay as they are.
A full SQLite file is real here: ``PRAGMA max_page_count`` makes SQLite answer SQLITE_FULL."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa

from sluice import errors
from sluice.api import errors as api_errors
from sluice.storage import database, faults


def _full(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.commit()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    return conn


def test_sqlite_full_is_unavailable_and_a_constraint_is_not(tmp_path: Path) -> None:
    conn = _full(tmp_path / "a.db")
    with pytest.raises(sqlite3.Error) as full:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    assert "full" in (faults.reason(full.value) or "")
    assert faults.is_full(full.value)
    with pytest.raises(errors.StorageUnavailable) as raised:
        faults.raise_if_unavailable(full.value)
    assert raised.value.__cause__ is full.value
    assert raised.value.retry_after_seconds == faults.RETRY_AFTER_SECONDS
    with pytest.raises(sqlite3.Error) as syntax:
        conn.execute("SELEC 1")
    assert faults.reason(syntax.value) is None
    faults.raise_if_unavailable(syntax.value)  # returns: the caller re-raises it


async def test_the_engine_and_the_inline_writer_raise_storage_unavailable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    engine = database.create_engine(url)
    writer = database.Writer(engine)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("CREATE TABLE t (x BLOB)"))
            pages = (await conn.execute(sa.text("PRAGMA page_count"))).scalar_one()
            await conn.execute(sa.text(f"PRAGMA max_page_count = {pages}"))
        with pytest.raises(errors.StorageUnavailable, match="full"):
            async with engine.begin() as conn:
                await conn.execute(sa.text("INSERT INTO t VALUES (zeroblob(100000))"))

        def fill(conn: sa.Connection) -> None:
            dbapi = conn.connection.dbapi_connection
            assert dbapi is not None
            cursor = dbapi.cursor()
            cursor.execute(f"PRAGMA max_page_count = {pages}")
            cursor.execute("INSERT INTO t VALUES (zeroblob(100000))")  # the driver's own cursor

        with pytest.raises(errors.StorageUnavailable, match="full"):
            await writer(fill)

        def broken(conn: sa.Connection) -> None:
            conn.exec_driver_sql("INSERT INTO nowhere VALUES (1)")

        with pytest.raises(sa.exc.OperationalError, match="no such table"):
            await writer(broken)
    finally:
        writer.dispose()
        await engine.dispose()


async def test_a_sqlite_urls_timeout_is_how_long_a_write_waits_for_a_lock(tmp_path: Path) -> None:
    """SQLite's busy timeout is the URL's ``timeout`` (seconds; ``sqlite3.connect``'s), 10 s
    unless it says: how long a write waits for another process's lock before it gives up
    (and the request is answered 503). A value that is not a number is refused up front."""
    held = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    held.execute("CREATE TABLE t (x INTEGER)")
    default = database.create_engine(f"sqlite:///{tmp_path / 'c.db'}")
    short = database.create_engine(f"sqlite:///{tmp_path / 'c.db'}?timeout=0.2")
    try:
        async with default.connect() as conn:
            assert (await conn.execute(sa.text("PRAGMA busy_timeout"))).scalar_one() == 10_000
        assert database.busy_timeout_ms(short.url) == 200
        held.execute("BEGIN IMMEDIATE")  # another process's write lock, held
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            async with short.begin() as conn:
                await conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        assert time.monotonic() - started < 5.0  # 0.2 s, not the default 10
        held.execute("ROLLBACK")
        async with short.begin() as conn:  # let go: the write goes through
            await conn.execute(sa.text("INSERT INTO t VALUES (2)"))
    finally:
        held.close()
        await default.dispose()
        await short.dispose()
    for bad in ("soon", "-1"):
        with pytest.raises(errors.InvalidRequest, match="not a number of seconds"):
            database.async_url(f"sqlite:///{tmp_path / 'd.db'}?timeout={bad}")


async def test_postgresql_refused_and_terminated_are_unavailable() -> None:
    from tests.chaos.processes import free_port
    from tests.conftest import PG_URL

    refused = database.create_engine(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
    try:
        with pytest.raises(errors.StorageUnavailable, match="unreachable"):
            async with refused.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
    finally:
        await refused.dispose()
    engine = database.create_engine(PG_URL)
    try:
        async with engine.connect() as conn:
            pid = await conn.scalar(sa.text("SELECT pg_backend_pid()"))
            killer = await asyncpg.connect(PG_URL)
            try:
                await killer.execute("SELECT pg_terminate_backend($1)", pid)
            finally:
                await killer.close()
            with pytest.raises(errors.StorageUnavailable):
                await conn.execute(sa.text("SELECT 1"))
        async with engine.connect() as conn:  # the pool recovered by itself
            assert await conn.scalar(sa.text("SELECT 1")) == 1
    finally:
        await engine.dispose()


def test_storage_unavailable_and_overloaded_are_503_with_retry_after() -> None:
    for exc in (
        errors.StorageUnavailable("disk full", retry_after_seconds=5),
        errors.Overloaded("backlog", retry_after_seconds=12),
    ):
        answer = api_errors.render(exc)
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == str(exc.retry_after_seconds)
        assert exc.code.encode() in answer.body
