"""The change counter shared by the processes of one SQLite file (``storage/change_counters``):
each instance maps the same 8 bytes, so one's bumps are the others' reads at once, and bumps
made at the same time from separate processes all count."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from sluice.storage.change_counters import ChangeCounter


def test_instances_on_one_file_see_each_others_bumps(tmp_path: Path) -> None:
    database = tmp_path / "sluice.db"
    one = ChangeCounter.beside(database, "workflow")
    other = ChangeCounter.beside(database, "workflow")
    try:
        assert (one.value(), other.value()) == (0, 0)
        one.bump()
        assert (one.value(), other.value()) == (1, 1)
        other.bump()
        assert one.value() == 2
        assert (tmp_path / "sluice.db-workflow-changes").stat().st_size == 8
        # Another kind of row counts apart.
        assert ChangeCounter.beside(database, "other").value() == 0
    finally:
        one.close()
        other.close()
    again = ChangeCounter.beside(database, "workflow")  # kept across opens (a restart)
    try:
        assert again.value() == 2
    finally:
        again.close()


def _bump(path: str, times: int, start: Any = None) -> None:
    counter = ChangeCounter(Path(path))
    if start is not None:
        start.wait(timeout=60)  # all together: their bumps overlap
    try:
        for _ in range(times):
            counter.bump()
    finally:
        counter.close()


def test_bumps_from_processes_at_once_all_count(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    workers = [context.Process(target=_bump, args=(str(path), 5_000, start)) for _ in range(3)]
    for worker in workers:
        worker.start()
    _bump(str(path), 5_000, start)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    counter = ChangeCounter(path)
    try:
        assert counter.value() == 20_000  # none collapsed into another (the flock)
    finally:
        counter.close()
