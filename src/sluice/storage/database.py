"""The engine for either dialect, and migrations applied at start.

SQLite is the embedded default: WAL, foreign keys on, and a single pooled connection, so the
one process that owns the file never fights itself for the write lock (transactions are short;
nothing holds one across a Node invocation). PostgreSQL is the store for several processes.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from sluice import errors
from sluice.storage import faults

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest migration: its file name starts with its revision id (``0024_timer_kinds.py`` is
#: revision ``0024``), and ids count up. ``tests/integration/test_migrations.py`` checks that
#: this is Alembic's own head.
HEAD = max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


#: SQLite: how long a write waits for another process's write lock (``sqlite3.connect``'s
#: ``timeout``, its busy timeout), seconds, unless the URL says (``sqlite:///x?timeout=2``):
#: after it the request is answered 503 ``storage_unavailable`` (``Writer``).
BUSY_TIMEOUT_S = 10.0


def async_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+asyncpg://…``; ``sqlite:///x`` →
    ``sqlite+aiosqlite:///x?timeout=10`` (``BUSY_TIMEOUT_S`` unless the URL gives one)."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise errors.InvalidRequest(f"SLUICE_DATABASE_URL is not a database URL: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
        timeout = parsed.query.get("timeout")
        if timeout is None:
            parsed = parsed.update_query_dict({"timeout": str(BUSY_TIMEOUT_S)})
        else:
            try:
                if float(str(timeout)) < 0:
                    raise ValueError
            except ValueError:
                raise errors.InvalidRequest(
                    f"SLUICE_DATABASE_URL: timeout={timeout!r} is not a number of seconds "
                    "(how long a write waits for another process's lock)"
                ) from None
    elif backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+asyncpg")
    else:
        raise errors.InvalidRequest(
            f"SLUICE_DATABASE_URL: unsupported database {backend!r} (use sqlite or postgresql)"
        )
    return parsed.render_as_string(hide_password=False)


#: PostgreSQL ends a session left idle inside a transaction this long (ms) at most. Sluice's
#: own transactions never wait on anything but the database, so one idle this long belongs to
#: a process that stalled (SIGSTOP, a VM pause): ended, its row locks no longer hide its jobs
#: from the claims of other workers (``SKIP LOCKED``). Shorter with a short lease:
#: ``idle_tx_ms``.
IDLE_TX_MS = 15_000


def idle_tx_ms(lease_ms: int) -> int:
    """How long a session may sit idle in a transaction, for the job worker's ``lease_ms``:
    3/8 of a lease (at most ``IDLE_TX_MS``, at least a second). A worker that stalled inside a
    transaction (marking its jobs done, renewing their leases) holds their rows locked until
    then, and claims skip locked rows: its jobs' leases pass 3/4 of a lease after its last
    renewal and claims look for them every 1/8, so they are taken over within one lease. With
    15 s for every lease, a 4 s lease's jobs waited 15.7 s (tests/chaos/test_stalls.py)."""
    return max(1_000, min(IDLE_TX_MS, lease_ms * 3 // 8))


#: Sessions of this database and role that wait for their client in the middle of a statement.
#: asyncpg prepares a statement with Parse, Describe and Flush (no Sync), then binds it: between
#: the two the session is ``active``, not idle, so ``idle_in_transaction_session_timeout`` does
#: not apply (nor ``statement_timeout``). A process stopped there holds its transaction's row
#: locks for as long as it is stopped (tests/chaos/test_stalls.py, under load: its jobs' rows,
#: skipped by every claim, and the source's row, which every commit of that source waits for).
#: ``application_name`` of Sluice's PostgreSQL sessions.
APPLICATION_NAME = "sluice"
#: How long ending a stalled session waits for its backend to be gone (PostgreSQL 14+): without
#: a wait, ``pg_terminate_backend`` returns once it has signalled the backend, whose locks
#: may still be held for the next claim (seen once in CI: the claim right after skipped the job).
_END_WAIT_MS = 5_000

_STALLED_SESSIONS = sa.text(
    "SELECT pid, pg_terminate_backend(pid, :wait_ms) FROM pg_stat_activity"
    " WHERE datname = current_database() AND usename = current_user"
    " AND application_name = :application"
    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    " AND state = 'active' AND wait_event_type = 'Client' AND wait_event = 'ClientRead'"
    " AND state_change < clock_timestamp() - make_interval(secs => :seconds)"
)


async def end_stalled_sessions(engine: AsyncEngine, *, older_than_ms: int) -> list[int]:
    """PostgreSQL: end Sluice's sessions (of this database and role, in any process) that have
    waited for their client in the middle of a statement longer than ``older_than_ms``, as
    PostgreSQL ends those idle in a transaction (``idle_tx_ms``); the ids of the backends
    ended. A client that is running sends the rest of a statement at once: one that has not for
    that long is stopped (SIGSTOP, a VM pause), and when it wakes its transaction fails and
    is retried (fenced as any stalled worker's). Nothing to do on SQLite (one process)."""
    if not is_postgres(engine):
        return []
    async with engine.connect() as conn:
        values = {
            "seconds": older_than_ms / 1000,
            "application": APPLICATION_NAME,
            "wait_ms": _END_WAIT_MS,
        }
        rows = (await conn.execute(_STALLED_SESSIONS, values)).all()
        await conn.commit()
    ended = [int(row[0]) for row in rows if row[1]]
    if ended:
        log.warning(
            "ended %d database sessions stalled in the middle of a statement for over %d ms "
            "(their processes stopped): their transactions' locks are free",
            len(ended),
            older_than_ms,
            extra={"action": "stalled_sessions_ended", "backends": ended},
        )
    return ended


def create_engine(url: str, *, idle_tx_ms: int = IDLE_TX_MS) -> AsyncEngine:
    target = async_url(url)
    if target.startswith("sqlite"):
        database = make_url(target).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(target, pool_size=1, max_overflow=0, pool_timeout=60)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        faults.install(engine.sync_engine)
        return engine
    engine = create_async_engine(
        target,
        pool_size=10,
        max_overflow=20,
        connect_args={
            "server_settings": {
                "idle_in_transaction_session_timeout": str(idle_tx_ms),
                # Names Sluice's sessions (pg_stat_activity): ``end_stalled_sessions`` ends
                # only these, never another application's sharing the database and role.
                "application_name": APPLICATION_NAME,
            }
        },
    )
    faults.install(engine.sync_engine)
    event.listen(engine.sync_engine, "checkin", _checked_in)
    event.listen(engine.sync_engine, "checkout", _ping_if_idle)
    return engine


#: A pooled PostgreSQL connection idle longer than this is pinged before it is lent again.
IDLE_PING_SECONDS = 1.0


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    record.info["idle_since"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """Ping a connection that sat idle (the server may have restarted, or a firewall dropped
    it); a dead one is replaced before anyone uses it. Not on every checkout, as
    ``pool_pre_ping`` does: through asyncpg that ping is three round trips (BEGIN, a query,
    ROLLBACK), as many as a busy worker's whole read. A connection lent again at once that
    finds the server gone fails its statement; SQLAlchemy then sees the disconnect and
    replaces every connection of the pool, and the caller's error is handled as any
    database failure (a job runs again, a request is answered 503)."""
    since = record.info.get("idle_since")
    if since is None or time.monotonic() - since < IDLE_PING_SECONDS:
        return
    try:
        dbapi_connection.ping()
    except Exception as exc:
        raise sa.exc.DisconnectionError(f"an idle connection is gone: {exc}") from exc


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    # A second process (``sluice accounts create`` while the server runs) waits, not fails:
    # for the URL's ``timeout`` (``async_url``), which ``sqlite3.connect`` makes the busy timeout.
    cursor.close()


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


async def migrate(engine: AsyncEngine) -> None:
    """Apply every pending migration. On PostgreSQL an advisory lock lets several Sluice
    processes start at once without racing each other through the same migration.

    A database already at ``HEAD`` (every start but the first after an upgrade of Sluice) is
    left without importing Alembic or reading its scripts: ~0.1 s of a server's start, and of
    every CLI command that opens the database."""
    async with engine.begin() as conn:
        if is_postgres(engine):
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(727274)"))
        if await _revision(conn) != HEAD:
            await conn.run_sync(_upgrade)


async def _revision(conn: AsyncConnection) -> str | None:
    """The revision the database is at (Alembic's ``alembic_version``), None before the first."""
    exists = (
        "SELECT to_regclass('alembic_version') IS NOT NULL"
        if conn.dialect.name == "postgresql"
        else "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    )
    if not (await conn.execute(sa.text(exists))).scalar():
        return None
    versions = (await conn.execute(sa.text("SELECT version_num FROM alembic_version"))).all()
    return str(versions[0][0]) if len(versions) == 1 else None


def alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def _upgrade(connection: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), "head")


async def open_database(url: str, *, idle_tx_ms: int = IDLE_TX_MS) -> AsyncEngine:
    engine = create_engine(url, idle_tx_ms=idle_tx_ms)
    try:
        await migrate(engine)
    except (OSError, sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        await engine.dispose()
        raise errors.InternalError(f"cannot open the database: {exc}") from exc
    except asyncio.CancelledError:
        await engine.dispose()
        raise
    return engine


#: "Busy" as SQLAlchemy raises it, and as SQLite's own cursor does (the hot paths use it).
_BUSY = (sa.exc.OperationalError, sqlite3.OperationalError)


class Reader:
    """Runs a short read-only function of a sync ``Connection`` with the fewest round trips.

    On SQLite, aiosqlite costs a thread hand-off per cursor call (a single SELECT is four,
    ~0.5 ms together on a busy machine, for a query that takes microseconds). Here the function
    runs inline, on a plain sqlite3 connection of the same file: in WAL mode a reader never
    waits for the writer, so it holds the loop only for its own ~0.1 ms. Its busy timeout is
    short; in the rare case SQLite still says "busy" (WAL recovery), the read is retried in a
    thread with the normal timeout. On PostgreSQL the async engine runs it with ``run_sync``.
    Only for indexed reads on hot paths; writes go through the async engine.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._sync: sa.Engine | None = None
        # Inline reads all run on the event loop's thread, one at a time: one connection,
        # in autocommit so no read transaction (and no stale WAL snapshot) outlives a read.
        self._inline: Connection | None = None
        if engine.dialect.name == "sqlite":
            url = engine.url.set(drivername="sqlite")
            self._sync = sa.create_engine(
                url, pool_size=2, max_overflow=2, connect_args={"check_same_thread": False}
            )
            event.listen(self._sync, "connect", _sqlite_reader_pragmas)
            faults.install(self._sync)
        else:
            # No BEGIN and ROLLBACK around a read (two of its three round trips): at READ
            # COMMITTED each statement reads its own snapshot, in a transaction or not.
            self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def __call__(self, fn: Callable[[Connection], T]) -> T:
        if self._sync is None:
            async with self._engine.connect() as conn:
                try:
                    return await conn.run_sync(fn)
                except errors.StorageUnavailable:
                    if not conn.invalidated:
                        raise
            # The pooled connection was dead (the server restarted since it was last used):
            # SQLAlchemy dropped it and its pool; a read is safe to try once more, afresh.
            async with self._engine.connect() as conn:
                return await conn.run_sync(fn)
        if self._inline is None:
            self._inline = self._sync.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            return fn(self._inline)
        except _BUSY as exc:
            faults.raise_if_unavailable(exc)
            return await asyncio.to_thread(_run_read_patiently, self._sync, fn)

    async def in_thread(self, fn: Callable[[Connection], T]) -> T:
        """As calling the reader, but off the event loop on SQLite too: for a read that walks
        many rows (a background read, never a request's)."""
        if self._sync is None:
            return await self(fn)
        return await asyncio.to_thread(_run_read_patiently, self._sync, fn)

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite database's file (None on PostgreSQL or in memory)."""
        database = self._engine.url.database if self._sync is not None else None
        return Path(database).absolute() if database and database != ":memory:" else None

    def dispose(self) -> None:
        if self._inline is not None:
            self._inline.close()
        if self._sync is not None:
            self._sync.dispose()


def _run_read_patiently(engine: sa.Engine, fn: Callable[[Connection], T]) -> T:
    with engine.connect() as conn:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={busy_timeout_ms(engine.url)}")
        try:
            return fn(conn)
        finally:
            conn.exec_driver_sql("PRAGMA busy_timeout=50")


def busy_timeout_ms(url: sa.URL) -> int:
    """The busy timeout a SQLite URL from ``async_url`` carries, ms."""
    return int(float(str(url.query.get("timeout", BUSY_TIMEOUT_S))) * 1000)


def _sqlite_reader_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    # Inline reads must not hold the event loop: fail fast, then retry in a thread.
    cursor.execute("PRAGMA busy_timeout=50")
    cursor.close()


def sqlite_dbapi(conn: Connection) -> Any | None:
    """The driver's own connection when ``conn`` is SQLite's, else None: a statement on its
    cursor costs a few µs against ~20-50 through SQLAlchemy (for the hot paths only, with SQL
    compiled once from the same SQLAlchemy statement)."""
    if conn.dialect.name != "sqlite":
        return None
    return conn.connection.dbapi_connection


@dataclass
class _LockState:
    """What this process last saw of one SQLite file's write lock (``Writer``)."""

    #: Another process held the write lock past the busy timeout, and no write started since
    #: has taken it.
    stalled: bool = False
    #: When the last write known to have taken the lock started (``time.monotonic()``).
    last_taken: float = 0.0


#: Per SQLite file, shared by every ``Writer`` of the process.
_LOCKS: dict[str, _LockState] = {}
#: While a file is marked stalled, how long a write keeps trying to take the lock at once
#: before it is refused: long enough for the process's own queued transactions to go first
#: once the stalled holder lets go.
STALLED_PATIENCE_S = 0.5


class Writer:
    """Runs a short write function of a sync ``Connection`` in a transaction of its own, with
    the fewest round trips: the hot write of the HTTP ingress (a batch of new jobs).

    Through aiosqlite a transaction is several thread hand-offs, and under load each waits for
    the GIL (up to the 5 ms switch interval): ~10 ms a commit, and queued behind the job
    worker's transactions for the engine's one connection. On SQLite the function runs inline
    instead, on a dedicated connection that never waits for the lock (busy timeout 0: SQLite's
    busy wait sleeps up to 100 ms a try) and never checkpoints (a checkpoint's fsync would hold
    the loop; the engine's connection checkpoints). While the engine's connection holds the
    write lock, the attempt rolls back at once and is tried again on the next turns of the
    loop (which the holder needs to commit), then after ``patience`` seconds on the engine
    itself. On PostgreSQL it runs on the async engine.

    Once a write to a SQLite file waited out the whole busy timeout (another process holds the
    write lock and does not move: one stalled holding it), the file is marked stalled for
    every ``Writer`` of this process. Until a write takes the lock again, a write tries only
    on its own connection (``STALLED_PATIENCE_S``) and is then refused (503): it does not
    queue on the engine's one connection behind others each waiting out the busy timeout
    (answers took up to 40.8 s so); one already waiting for that connection when the file is
    marked is refused as soon as it gets it. A write that failed so but had started before the
    last one that took the lock does not mark the file again (it was queued behind the stall).
    """

    def __init__(self, engine: AsyncEngine, patience: float = 0.05) -> None:
        self._engine = engine
        self._patience = patience
        self._sync: sa.Engine | None = None
        self._inline: Connection | None = None
        self._lock = _LOCKS.setdefault(str(engine.url.database), _LockState())
        if engine.dialect.name == "sqlite":
            url = engine.url.set(drivername="sqlite")
            self._sync = sa.create_engine(
                url, pool_size=1, max_overflow=0, connect_args={"check_same_thread": False}
            )
            event.listen(self._sync, "connect", _sqlite_pragmas)
            faults.install(self._sync)

    async def __call__(self, fn: Callable[[Connection], T]) -> T:
        started = time.monotonic()
        try:
            return await self._write(fn, started)
        except Exception as exc:  # the driver's own cursor's errors too
            faults.raise_if_unavailable(exc)
            if self._sync is not None:
                # Still locked after the busy timeout (the URL's, 10 s): another process holds
                # the write lock and does not move (stalled): 503, not 500.
                try:
                    faults.raise_if_locked(exc)
                except errors.StorageUnavailable:
                    if started >= self._lock.last_taken:
                        self._lock.stalled = True
                    raise
            raise

    async def _write(self, fn: Callable[[Connection], T], started: float) -> T:
        if self._sync is not None:
            if self._inline is None:
                self._inline = self._sync.connect()
                self._inline.exec_driver_sql("PRAGMA busy_timeout=0")
                self._inline.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
                self._inline.commit()  # SQLAlchemy's autobegin: end it before begin()
            stalled = self._lock.stalled
            deadline = started + (
                max(self._patience, STALLED_PATIENCE_S) if stalled else self._patience
            )
            dbapi = self._inline.connection.dbapi_connection
            tries = 0
            while True:
                changes = dbapi.total_changes if dbapi is not None else 0
                try:
                    with self._inline.begin():
                        result = _ending(fn)(self._inline)
                except _BUSY as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                else:
                    if dbapi is not None and dbapi.total_changes != changes:
                        self._taken(started)  # it wrote: it held the lock
                    return result
                tries += 1
                if time.monotonic() > deadline:
                    break
                # The next turn of the loop first, then a pause: no hot spin on a long hold.
                await asyncio.sleep(0 if tries < 8 else 0.001)
            if stalled:
                raise sqlite3.OperationalError("database is locked (by a stalled process)")
        async with self._engine.begin() as conn:
            if self._sync is not None and self._lock.stalled:
                # Marked while this write waited for the engine's connection (behind the one
                # that waited out the busy timeout): refused now, not after another one.
                raise sqlite3.OperationalError("database is locked (by a stalled process)")
            result = await conn.run_sync(_ending(fn))
        self._taken(started)
        return result

    def _taken(self, started: float) -> None:
        self._lock.stalled = False
        self._lock.last_taken = max(self._lock.last_taken, started)

    def dispose(self) -> None:
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._sync is not None:
            self._sync.dispose()


#: Transactions in one group commit, at most: a bound on its latency.
MAX_GROUP = 256


class GroupWriter:
    """A ``Writer`` whose transactions asked for while one group commits share the next
    (on SQLite a transaction's fixed cost is most of a small run's). When a group fails, each
    of its transactions runs again alone, so only the failing one's caller sees its error
    (a transaction function must be safe to run again after a rollback). A caller that goes
    away does not cancel the write: the group is a task of its own."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._group: list[tuple[Callable[[Connection], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def __call__(self, fn: Callable[[Connection], T]) -> T:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._group.append((fn, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        result: T = await future
        return result

    async def _flush(self) -> None:
        try:
            while self._group:
                group, self._group = self._group[:MAX_GROUP], self._group[MAX_GROUP:]
                try:
                    results = await self.writer(_all([fn for fn, _ in group]))
                except Exception:
                    if len(group) > 1:
                        log.warning("a group commit of %d failed: each again alone", len(group))
                    for item in group:
                        await self._alone(*item)
                    continue
                for (_, future), result in zip(group, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            # In the same step as the last look at _group (no await between).
            self._flusher = None

    async def _alone(self, fn: Callable[[Connection], Any], future: asyncio.Future[Any]) -> None:
        try:
            result = await self.writer(fn)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(result)


def _all(fns: list[Callable[[Connection], Any]]) -> Callable[[Connection], list[Any]]:
    def transaction(conn: Connection) -> list[Any]:
        return [fn(conn) for fn in fns]

    return transaction


#: ``conn.info``'s key for the work to do at the end of a ``Writer``'s transaction.
_AT_END = "sluice_at_end"


def at_end(conn: Connection, key: Any, fn: Callable[[Connection], object]) -> bool:
    """Have ``fn`` run once at the end of this transaction's work, before it commits: in a
    group commit, after every function of the group (``key``: registered once, the first
    ``fn`` kept). Only in a ``Writer``'s transaction; elsewhere False, nothing registered, and
    the caller does its work at once. What is gathered for it belongs in ``memo``."""
    held = conn.info.get(_AT_END)
    if held is None or held[0] is not conn.get_transaction():
        return False
    held[1].setdefault(key, fn)
    return True


def _ending(fn: Callable[[Connection], T]) -> Callable[[Connection], T]:
    """``fn`` as a ``Writer`` runs it: then what ``at_end`` registered, in the same transaction."""

    def transaction(conn: Connection) -> T:
        hooks: dict[Any, Callable[[Connection], object]] = {}
        conn.info[_AT_END] = (conn.get_transaction(), hooks)
        result = fn(conn)
        for hook in hooks.values():
            hook(conn)
        # Not in a ``finally``: after a failure (a statement cancelled mid-way) the connection
        # may refuse even ``info`` until rolled back, and that error would replace the first
        # (a cancellation, turned into an exception). Left behind, the entry is inert: it
        # names a transaction that is over (``at_end`` compares).
        del conn.info[_AT_END]
        return result

    return transaction


def memo(conn: Connection) -> dict[Any, Any]:
    """A dict that lives as long as ``conn``'s transaction: what one transaction function of a
    group commit read, the next may reuse (it is the same transaction)."""
    tx = conn.get_transaction()
    held = conn.info.get("sluice_memo")
    if held is None or held[0] is not tx:
        held = conn.info["sluice_memo"] = (tx, {})
    result: dict[Any, Any] = held[1]
    return result
