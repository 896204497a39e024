"""The engine for either dialect, and migrations applied at start.

SQLite is the embedded default: WAL, foreign keys on, and a single pooled connection, so the
one process that owns the file never fights itself for the write lock (transactions are short;
nothing holds one across a Node invocation). PostgreSQL is the store for several processes.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sluice import errors

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"


def async_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+asyncpg://…``; ``sqlite:///x`` → ``sqlite+aiosqlite:///x``."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise errors.InvalidRequest(f"SLUICE_DATABASE_URL is not a database URL: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    else:
        raise errors.InvalidRequest(
            f"SLUICE_DATABASE_URL: unsupported database {backend!r} (use sqlite or postgresql)"
        )
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str) -> AsyncEngine:
    target = async_url(url)
    if target.startswith("sqlite"):
        database = make_url(target).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(target, pool_size=1, max_overflow=0, pool_timeout=60)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(target, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    # A second process (``sluice accounts create`` while the server runs) waits, not fails.
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


async def migrate(engine: AsyncEngine) -> None:
    """Apply every pending migration. On PostgreSQL an advisory lock lets several Sluice
    processes start at once without racing each other through the same migration."""
    async with engine.begin() as conn:
        if is_postgres(engine):
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(727274)"))
        await conn.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


async def open_database(url: str) -> AsyncEngine:
    engine = create_engine(url)
    try:
        await migrate(engine)
    except (OSError, sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        await engine.dispose()
        raise errors.InternalError(f"cannot open the database: {exc}") from exc
    except asyncio.CancelledError:
        await engine.dispose()
        raise
    return engine
