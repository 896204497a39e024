"""A counter of changes to one kind of row, shared by every process on one SQLite file: what a
process read of those rows stays good while the counter has not moved, so a hot path can skip
reading them again (``engine/components/workflows.py``: a workflow's stamp, once per request).

The counter is 8 bytes in a file beside the database, mapped into each process's memory:
reading it is a memory read, no system call. A writer moves it *after* its transaction has
committed and before it answers its caller (``bump``, under an exclusive ``flock`` so two
processes' bumps never collapse into one). A reader reads the counter *before* the rows and
keeps what it read under that value, so

- a change committed and bumped before a request began is seen by that request: its reader
  finds the counter moved, and reads again;
- a change bumped while a reader was reading leaves that reader's copy under the older value,
  so its next read reads again;
- between a change's commit and its bump (microseconds, before the writer's caller has its
  answer) a reader may still use its copy, as if it had read a moment earlier.

A process that dies between its commit and its bump leaves the others' copies stale: readers
also read again once their copy is older than a few seconds (``Workflows``), which bounds
that, and any row changed without a bump. SQLite only: every process of a SQLite database is
on one machine with its file. PostgreSQL's processes may not be, and keep reading the rows.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

_SIZE = 8
_FORMAT = "<Q"


class ChangeCounter:
    """The counter in ``path`` (made, as zero, when missing)."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            with _locked(fd):
                if os.fstat(fd).st_size < _SIZE:
                    os.pwrite(fd, bytes(_SIZE), 0)
            self._map = mmap.mmap(fd, _SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    @classmethod
    def beside(cls, database: Path, kind: str) -> ChangeCounter:
        """The counter of ``kind`` rows of the SQLite file ``database``."""
        return cls(database.with_name(f"{database.name}-{kind}-changes"))

    def value(self) -> int:
        value: int = struct.unpack_from(_FORMAT, self._map)[0]
        return value

    def bump(self) -> None:
        """One more change (call it after the change's commit)."""
        with _locked(self._fd):
            struct.pack_into(_FORMAT, self._map, 0, (self.value() + 1) % (1 << 64))

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
