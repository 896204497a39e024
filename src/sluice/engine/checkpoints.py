"""SQLite's write-ahead log, kept small while Sluice runs.

The hot writers never checkpoint (``storage.database.Writer``: a checkpoint's fsync would hold
the event loop), so without this the WAL grows for as long as the process runs: every commit
appends to it, and SQLite starts it again from the top only after a checkpoint has copied all
of it back into the database file. Here a task of its own does that, off the loop, on a
connection of its own, every ``interval_s``:

- a PASSIVE checkpoint: copies what no reader still needs, takes no lock, never waits;
- then, when the WAL file is over ``max_bytes`` or the disk has less than that free, a
  TRUNCATE checkpoint: waits up to ``TRUNCATE_WAIT_MS`` for the writer lock and the readers,
  copies the (little) rest and cuts the file to 0 bytes. It holds the writer lock while it
  runs: the endpoints' writer falls back to waiting (``Writer``'s patience), a few ms.

A full disk the WAL itself filled is the second case: the truncation gives the space back
(``storage/faults.py`` answers 503 meanwhile). On PostgreSQL there is nothing to do.

    async with Checkpointer(path, WalPolicy(1.0, 64 << 20)) as checkpointer:
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sluice import metrics

log = logging.getLogger(__name__)

#: How long a TRUNCATE checkpoint waits for the writer lock and the readers, ms.
TRUNCATE_WAIT_MS = 200


@dataclass(frozen=True)
class WalPolicy:
    #: Seconds between two checkpoints.
    interval_s: float
    #: The WAL file is truncated once it is larger than this, bytes.
    max_bytes: int


@dataclass(frozen=True)
class Checkpoint:
    """What one step did: the mode it ended with, whether SQLite said busy (a reader or the
    writer held it off: tried again next time), and the WAL file's size after it."""

    mode: str
    busy: bool
    wal_bytes: int


class Checkpointer:
    """Checkpoints the SQLite database at ``path`` while it is open (an async context
    manager); ``step()`` runs one checkpoint now (blocking: tests call it, the loop runs it in
    a thread)."""

    def __init__(self, path: Path, policy: WalPolicy) -> None:
        self.path = path
        self.wal = Path(f"{path}-wal")
        self.policy = policy
        self._conn: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        #: The largest WAL file seen since the start (``bench/``, the metric).
        self.peak_wal_bytes = 0

    async def __aenter__(self) -> Checkpointer:
        self._task = asyncio.create_task(self._loop(), name="sluice-checkpointer")
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.policy.interval_s)
            try:
                await asyncio.to_thread(self.step)
            except sqlite3.Error as exc:  # the disk is full, say: tried again next time
                log.warning("checkpoint failed: %s", exc, extra={"action": "checkpoint"})

    def wal_bytes(self) -> int:
        try:
            return self.wal.stat().st_size
        except FileNotFoundError:
            return 0

    def _free_bytes(self) -> int:
        stat = os.statvfs(self.path.parent)
        return stat.f_bavail * stat.f_frsize

    def step(self) -> Checkpoint:
        """One checkpoint: PASSIVE, then TRUNCATE when the WAL is over the bound or the disk is
        nearly full."""
        size = self.wal_bytes()
        self.peak_wal_bytes = max(self.peak_wal_bytes, size)
        if size == 0:
            return Checkpoint("none", False, 0)
        conn = self._connection()
        started = time.monotonic()
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        mode = "passive"
        if self.wal_bytes() > self.policy.max_bytes or self._free_bytes() < self.policy.max_bytes:
            mode = "truncate"
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        after = self.wal_bytes()
        metrics.wal_checkpointed(mode, after, time.monotonic() - started)
        if mode == "truncate":
            log.info(
                "WAL checkpointed and truncated: %d → %d bytes%s",
                size,
                after,
                " (busy: again next time)" if busy else "",
                extra={"action": "checkpoint"},
            )
        return Checkpoint(mode, bool(busy), after)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
            self._conn = conn
        return self._conn
