"""The cgroups of the runner jails: memory (heap and off-heap), processes and CPU weight.

Used as root only (``sandbox.py``), with cgroup v1 controllers (``/sys/fs/cgroup/memory``,
``pids``, ``cpu``) or a v2 tree whose root enables ``memory`` and ``pids``. Each sandbox gets
one parent per controller (``sluice-<pid>-<random>``), and each jail a child of it named for
its account. Empty parents of dead Sluice processes are removed at open.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")


class Controllers:
    """This process's cgroup parents, and the children it makes for jails."""

    def __init__(self, *, memory_mb: int, max_processes: int) -> None:
        self.memory_mb = memory_mb
        self.max_processes = max_processes
        self.parents: list[Path] = []

    def open(self, tag: str) -> None:
        """Make the parents when cgroups are writable; else leave ``parents`` empty (the
        caller watches memory another way)."""
        candidates: list[Path] = []
        if (ROOT / "memory" / "memory.limit_in_bytes").exists():
            candidates = [ROOT / "memory" / tag, ROOT / "pids" / tag]
            if (ROOT / "cpu" / "cpu.shares").exists():
                candidates.append(ROOT / "cpu" / tag)
        elif {"memory", "pids"} <= set(_read(ROOT / "cgroup.subtree_control").split()):
            candidates = [ROOT / tag]
        for path in candidates:
            _remove_stale(path.parent)
        made: list[Path] = []
        try:
            for path in candidates:
                path.mkdir(exist_ok=True)
                made.append(path)
            if len(made) == 1:  # v2: let the children use the controllers
                cpu = "cpu" in _read(ROOT / "cgroup.subtree_control").split()
                (made[0] / "cgroup.subtree_control").write_text(
                    "+memory +pids" + (" +cpu" if cpu else "")
                )
            # CPU: on each core, all jails together weigh half of a busy thread of this server
            # (the API and endpoints stay responsive), and each jail weighs the same as any
            # other (an account with many busy invocations gets no more than one with one).
            # A group's weight is spread over the cores it runs on, hence times the cores: a
            # flat 512 (half of one thread, on two cores) made user code weigh a quarter of
            # any other process per core, and on a busy host a thread's start in a jail took
            # 10x as long as outside (bench/README.md, "A new deployment's first call").
            cores = len(os.sched_getaffinity(0))
            for path in made:
                if (path / "cpu.shares").exists():
                    (path / "cpu.shares").write_text(str(512 * cores))
                if (path / "cpu.weight").exists():
                    (path / "cpu.weight").write_text(str(min(50 * cores, 10_000)))
        except OSError as exc:
            log.warning("cgroups not usable (%s): memory is watched through RSS instead", exc)
            for path in made:
                with contextlib.suppress(OSError):
                    path.rmdir()
            return
        self.parents = made

    def make(self, name: str) -> list[Path]:
        """One jail's cgroups (one per controller), limits written."""
        made: list[Path] = []
        memory = self.memory_mb * 1024 * 1024
        for parent in self.parents:
            cg = parent / name
            with contextlib.suppress(FileExistsError):
                cg.mkdir()
            made.append(cg)
            if (cg / "memory.limit_in_bytes").exists():  # v1
                (cg / "memory.limit_in_bytes").write_text(str(memory))
                # Swap would let the runner grow past its limit: memory+swap gets the same cap.
                with contextlib.suppress(OSError):
                    (cg / "memory.memsw.limit_in_bytes").write_text(str(memory))
            if (cg / "memory.max").exists():  # v2
                (cg / "memory.max").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (cg / "memory.swap.max").write_text("0")
            if (cg / "pids.max").exists():
                (cg / "pids.max").write_text(str(self.max_processes))
        return made

    def close(self) -> None:
        for parent in self.parents:
            _remove_tree(parent)
        self.parents = []


def oom_killed(groups: list[Path]) -> bool:
    """Whether the kernel's OOM killer acted in any of ``groups``."""
    for cg in groups:
        for name in ("memory.oom_control", "memory.events"):
            with contextlib.suppress(OSError, ValueError):
                for line in (cg / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
    return False


def kill_all(group: Path) -> None:
    """SIGKILL every process in ``group`` (none left is a no-op)."""
    with contextlib.suppress(OSError):
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_stale(controller: Path) -> None:
    """Remove the empty cgroups of Sluice processes that died without closing their sandbox."""
    for parent in controller.glob("sluice-*"):
        pid = parent.name.removeprefix("sluice-").split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove_tree(parent)


def _remove_tree(parent: Path) -> None:
    for child in sorted(parent.glob("*"), reverse=True):
        if child.is_dir():
            with contextlib.suppress(OSError):
                child.rmdir()
    with contextlib.suppress(OSError):
        parent.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
