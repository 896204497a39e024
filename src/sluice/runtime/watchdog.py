"""What a jail holds in memory when no cgroup counts it: the RSS of its processes plus what its
tmpfs mounts hold (``/tmp``, ``/dev/shm``: pages of a tmpfs are memory, yet no process's RSS).

Without cgroups (not root, or cgroups not writable) the runner's watchdog (``runner.py``) kills
a jail past its memory limit by this figure. Without it, files in ``/dev/shm`` held memory no
limit saw (issue 25: a 256 MB runner held 1 GiB there). The jail's mounts are read from the
host through ``/proc/<pid>/root`` of a process inside the jail; when that cannot be read, the
sandbox refuses to start runners (``sandbox.Sandbox._probe``) rather than run them unbounded.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: The jail's writable tmpfs mounts (``sandbox.py`` sizes each).
TMPFS = ("tmp", "dev/shm")


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (those still alive)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError, ValueError):
            for task in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                todo.extend(int(c) for c in children)
    return out


def rss(pids: list[int]) -> int:
    """The processes' resident memory, bytes (0 for those already gone)."""
    total = 0
    for p in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def inside(pids: list[int]) -> int | None:
    """A process of ``pids`` in a mount namespace other than this process's (the jail)."""
    try:
        ours = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return None
    for p in reversed(pids):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{p}/ns/mnt") != ours:
                return p
    return None


def tmpfs_used(pid: int) -> int:
    """Bytes the jail's tmpfs mounts hold, seen through ``pid`` (a process inside it).
    Raises ``OSError`` when they cannot be read. 0 while ``pid`` has not moved into its jail's
    root yet (bubblewrap sets the mounts up in the new namespace first): its ``/tmp`` is then
    the host's, whose use (the host's disk) is none of the jail's."""
    root, host = os.stat(f"/proc/{pid}/root"), os.stat("/")
    if (root.st_dev, root.st_ino) == (host.st_dev, host.st_ino):
        return 0
    total = 0
    for mount in TMPFS:
        st = os.statvfs(f"/proc/{pid}/root/{mount}")
        total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


def jail_memory(pid: int) -> int:
    """RSS of ``pid``'s tree plus its jail's tmpfs (the latter 0 until the jail is up)."""
    pids = tree(pid)
    used = rss(pids)
    jailed = inside(pids)
    if jailed is not None:
        with contextlib.suppress(OSError):
            used += tmpfs_used(jailed)
    return used
