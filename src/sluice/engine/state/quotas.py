"""The storage quota of each account (issue 25): what it keeps stored (events, runs, logs,
``$.service.db`` stores, data store records, files endpoints stored) against
``storage_quota_mb``.

The figure is a counter kept in the database (``storage/usage.py``), grown in the transaction
of each write that stores something (``charge_sync``: one upsert, whose answer this process
keeps). Deciding costs a set lookup: the accounts this process saw over the quota. An account
over it is counted again exactly (``usage.recount_sync``) at most once per ``RECOUNT_MS``, so
space that retention trims or deletes freed is found; a recount under the quota lets it write
again.

Refused while over: requests to its endpoints (507 ``storage_quota_exceeded``, before the body
is read), the results of its source invocations and workflow runs (the run fails with
``STORAGE_QUOTA``; nothing of it is stored but the error), and data store writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import orjson
from sqlalchemy.engine import Connection

from sluice import errors
from sluice.clock import Clock
from sluice.storage import database, usage

log = logging.getLogger(__name__)

#: An account over its quota is counted again exactly at most this often, ms.
RECOUNT_MS = 60_000
#: ``database.memo``'s key of the charges gathered for the end of a transaction.
_CHARGES = "quota_charges"


def size_of(*values: Any) -> int:
    """Bytes stored values count for: the characters of their compact JSON, as a JSON column
    stores it (``domain/text.stored_json``) and the recount measures it (a ``str`` as its text).
    One orjson dump each (``json.dumps`` here was ~3% of a workflow request's CPU in the server:
    every run is counted), ``json``'s for what orjson refuses (keys that are not strings, lone
    surrogates).

    >>> size_of({"a": [1, "b"]}, None, "xyz")
    16
    >>> size_of({"é": 1})  # a character, as stored, not its ``\\u00e9`` escape
    7
    >>> size_of({1: "\\ud800"}) == len(json.dumps({1: "\\ud800"}, separators=(",", ":")))
    True
    """
    n = 0
    for value in values:
        if value is None:
            continue
        if isinstance(value, str):
            n += len(value)
            continue
        try:
            n += len(orjson.dumps(value, default=str).decode())
        except TypeError:  # orjson.JSONEncodeError
            n += len(json.dumps(value, separators=(",", ":"), default=str))
    return n


class StorageQuota:
    def __init__(self, quota_mb: int, clock: Clock, writer: database.Writer | None = None) -> None:
        self.quota_bytes = max(quota_mb, 0) << 20
        self.clock = clock
        self.writer = writer
        #: The accounts over the quota as this process last saw them: ``{owner: counted_ms}``.
        self._over: dict[str, int] = {}
        self._recounting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.quota_bytes > 0

    def error(self) -> errors.StorageQuotaExceeded:
        return errors.StorageQuotaExceeded(
            f"this account keeps stored its quota of {self.quota_bytes >> 20} MB (events, runs, "
            "logs, db and data stores, stored files): nothing more is stored until some is "
            "deleted or the operator raises SLUICE_STORAGE_QUOTA_MB",
            details={"quota_bytes": self.quota_bytes},
        )

    def check(self, owner_id: str) -> None:
        """Raise ``StorageQuotaExceeded`` when the account is over (a dict lookup); a recount is
        started in the background when one is due."""
        counted = self._over.get(owner_id)
        if counted is None:
            return
        if self.clock.now_ms() - counted >= RECOUNT_MS and self.writer is not None:
            self._start_recount(owner_id)
        raise self.error()

    def over_sync(self, conn: Connection, owner_id: str, now_ms: int) -> bool:
        """In a write's transaction: is the account over (recounted first when due)?"""
        counted = self._over.get(owner_id)
        if counted is None:
            return False
        if now_ms - counted >= RECOUNT_MS:
            figure = usage.recount_sync(conn, owner_id, now_ms)
            self._note(owner_id, figure, now_ms)
            return owner_id in self._over
        return True

    def charge_sync(
        self, conn: Connection, owner_id: str, n: int, now_ms: int, *, at_end: bool = False
    ) -> None:
        """Count ``n`` bytes the transaction stores for the account. ``at_end``: in a
        ``database.Writer``'s transaction, once for all its charges at its end (a group
        commit's runs: one statement per account, not one per run; so, as a batch of source
        runs, a group can pass the quota by its own size before the next write is refused)."""
        if not self.enabled or n <= 0:
            return
        if at_end and database.at_end(conn, _CHARGES, self._charge_gathered):
            gathered = database.memo(conn).setdefault(_CHARGES, {})
            before, _ = gathered.get(owner_id, (0, now_ms))
            gathered[owner_id] = (before + n, now_ms)
            return
        self._charge(conn, owner_id, n, now_ms)

    def _charge_gathered(self, conn: Connection) -> None:
        for owner_id, (n, now_ms) in database.memo(conn).pop(_CHARGES, {}).items():
            self._charge(conn, owner_id, n, now_ms)

    def _charge(self, conn: Connection, owner_id: str, n: int, now_ms: int) -> None:
        figure = usage.add_sync(conn, owner_id, n, now_ms)
        if figure >= self.quota_bytes and owner_id not in self._over:
            self._over[owner_id] = now_ms - RECOUNT_MS  # the first refusal recounts
            log.warning(
                "account %s is at its storage quota (%d bytes)",
                owner_id,
                figure,
                extra={"action": "storage_quota", "owner_id": owner_id},
            )

    def _note(self, owner_id: str, figure: int, now_ms: int) -> None:
        if self.enabled and figure >= self.quota_bytes:
            self._over[owner_id] = now_ms
        else:
            self._over.pop(owner_id, None)

    def _start_recount(self, owner_id: str) -> None:
        if owner_id in self._recounting or self.writer is None:
            return
        self._recounting.add(owner_id)
        writer = self.writer

        async def recount() -> None:
            try:
                now = self.clock.now_ms()
                figure = await writer(lambda conn: usage.recount_sync(conn, owner_id, now))
                self._note(owner_id, figure, now)
            except Exception:
                log.exception("could not recount the storage of %s", owner_id)
            finally:
                self._recounting.discard(owner_id)

        task = asyncio.get_running_loop().create_task(recount())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def figure(self, reader: database.Reader, owner_id: str) -> int:
        """The account's stored bytes as counted (``GET /v1/users/me``)."""
        stored, _counted = await reader.in_thread(lambda conn: usage.read_sync(conn, owner_id))
        return stored
