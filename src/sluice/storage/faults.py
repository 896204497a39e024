"""Which driver errors mean the store is unavailable, translated where they enter.

A full disk, an I/O error, or a PostgreSQL server that is down, shutting down or out of disk is
not a bug in Sluice: nothing was stored, and the same request succeeds once the store is back.
Such errors become one ``errors.StorageUnavailable`` (answered 503 with ``Retry-After``) at
every door a driver error comes in by:

- SQLAlchemy's engines (``install``: its ``handle_error`` hook, which also sees every failed
  connect, and a ``do_connect`` wrapper for the errors SQLAlchemy does not wrap, such as
  asyncpg's ``ConnectionRefusedError``);
- the hot paths that use the driver's own cursor or connection (``storage.database.Writer``,
  the enqueuer's asyncpg batch): they call ``translate``.

Anything else (a constraint, a syntax error) is left as it is, and so is SQLite's "database is
locked" where it enters: readers and the inline writer retry it. Only a ``Writer``'s write
that waited out the whole busy timeout for it (another process held the write lock all that
while: one stalled holding it) is translated, there (``raise_if_locked``).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from sluice import errors

log = logging.getLogger(__name__)

#: SQLite's primary result codes (``sqlite3.Error.sqlite_errorcode & 0xFF``) that mean the
#: file cannot be written now: SQLITE_IOERR (10, and its extended codes), SQLITE_FULL (13),
#: SQLITE_CANTOPEN (14).
_SQLITE_CODES = {10: "an I/O error", 13: "the disk is full", 14: "the file cannot be opened"}

#: asyncpg's errors that mean the server is unreachable, going away, or out of resources
#: (class 53: disk full, out of memory, too many connections; class 57P: shutdown; class 08).
_PG_DOWN: tuple[type[BaseException], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.InsufficientResourcesError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
)

#: Seconds a client is told to wait before trying again.
RETRY_AFTER_SECONDS = 5
#: One warning per this many seconds at most, however many requests fail meanwhile.
_LOG_EVERY_S = 10.0
_logged_at = -_LOG_EVERY_S
#: ``unavailable_count``'s count.
_unavailable_seen = 0


def reason(exc: BaseException) -> str | None:
    """Why ``exc`` means the store is unavailable (a few words), or None when it does not.
    Looks through SQLAlchemy's wrapper and asyncpg's adapter to the driver's own error."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 5:
        seen += 1
        if isinstance(current, errors.StorageUnavailable):
            return current.message
        if isinstance(current, sqlite3.Error):
            code = getattr(current, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _SQLITE_CODES:
                return f"SQLite: {_SQLITE_CODES[code & 0xFF]} ({current})"
            text = str(current)
            if "disk is full" in text or "disk I/O error" in text:
                return f"SQLite: {text}"
            return None
        if isinstance(current, _PG_DOWN):
            return f"PostgreSQL: {type(current).__name__}: {current}"
        if isinstance(current, asyncpg.PostgresError):
            return None
        if isinstance(current, asyncpg.InterfaceError):  # also a client's own misuse
            text = str(current)
            return f"PostgreSQL: {text}" if "connection" in text and "closed" in text else None
        if isinstance(current, OSError | TimeoutError):
            return f"the database is unreachable: {type(current).__name__}: {current}"
        if isinstance(current, sa.exc.DBAPIError):
            if current.connection_invalidated:
                return f"the database connection was lost: {current.orig}"
            current = current.orig
            continue
        # asyncpg's adapter in SQLAlchemy raises its own class, chained from asyncpg's.
        current = current.__cause__
    return None


def raise_if_unavailable(exc: BaseException) -> None:
    """Raise ``errors.StorageUnavailable`` from ``exc`` when ``exc`` means the store is
    unavailable; else return (the caller re-raises ``exc``)::

        except Exception as exc:
            faults.raise_if_unavailable(exc)
            raise
    """
    if isinstance(exc, errors.StorageUnavailable):
        return
    why = reason(exc)
    if why is not None:
        raise _unavailable(why) from exc


def raise_if_locked(exc: BaseException) -> None:
    """Raise ``errors.StorageUnavailable`` from ``exc`` when it is SQLite's "database is
    locked" (SQLITE_BUSY); else return. For a write that already waited its busy timeout."""
    seen, current = 0, exc  # type: int, BaseException | None
    while current is not None and seen < 3:
        seen += 1
        if isinstance(current, sqlite3.OperationalError):
            code = getattr(current, "sqlite_errorcode", None)
            if (code is not None and code & 0xFF == 5) or "database is locked" in str(current):
                raise _unavailable(
                    "SQLite: another process has held the write lock past the busy timeout"
                ) from exc
            return
        current = current.orig if isinstance(current, sa.exc.DBAPIError) else current.__cause__


def unavailable_count() -> int:
    """How many times this process found the store unavailable (``StorageUnavailable`` raised
    where a driver error entered): a reader compares two counts to know whether the store
    failed in between (``engine/queue/admission.py``: no run rate is measured over an outage)."""
    return _unavailable_seen


def _unavailable(why: str) -> errors.StorageUnavailable:
    global _unavailable_seen
    _unavailable_seen += 1
    _warn(why)
    return errors.StorageUnavailable(
        f"the database cannot store this now ({why}); nothing was stored: retry later",
        retry_after_seconds=RETRY_AFTER_SECONDS,
    )


def _warn(why: str) -> None:
    global _logged_at
    now = time.monotonic()
    if now - _logged_at >= _LOG_EVERY_S:
        _logged_at = now
        log.warning("storage unavailable: %s", why, extra={"action": "storage_unavailable"})


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` (translated or not) says the disk is full: a checkpoint may free it."""
    why = reason(exc) or ""
    return "full" in why.lower() or "DiskFull" in why


def install(engine: Engine) -> None:
    """Translate the unavailable store's errors raised through ``engine`` (a sync engine, or an
    async engine's ``sync_engine``)."""
    event.listen(engine, "handle_error", _handle_error)
    event.listen(engine, "do_connect", _connect)


def _handle_error(context: Any) -> None:
    # Raised here, SQLAlchemy still cleans up first (invalidates a lost connection).
    original = context.original_exception
    if not isinstance(original, Exception):
        # A task cancelled during a statement (a worker stopping): SQLAlchemy calls that a
        # disconnect, but it is no outage, and the cancellation must reach the task.
        return
    if context.is_disconnect and reason(original) is None:
        raise _unavailable(f"the database connection was lost: {original}") from original
    why = reason(original)
    if why is None:
        return
    if context.dialect.name == "postgresql":
        # Whatever the driver says of its connection now, one that met an outage is not lent
        # again: SQLAlchemy invalidates it and the pool's older ones (it reads this after the
        # handler raises), so a server that is back is reached on fresh connections.
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = True
    raise _unavailable(why) from original


def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
    try:
        return dialect.connect(*cargs, **cparams)
    except Exception as exc:
        raise_if_unavailable(exc)
        raise
