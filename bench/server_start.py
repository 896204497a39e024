"""A server's start: ``sluice serve`` on a fresh data folder until its first ``/healthz``
answer, the wall time and the CPU it took, for one checkout or several alternated (issue 28:
the test suite starts ~90 servers, and every operator restart pays it too).

Each checkout's ``src`` is put first on ``PYTHONPATH`` and run with this checkout's venv, so a
base commit needs only ``git worktree add /tmp/base <commit>``. Each start gets a new data
folder (SQLite: the migrations and the core components' first publication are part of it),
the sandbox as configured (``SLUICE_SANDBOX``), and is stopped once it answered. Figures, per
checkout: the median and range of the wall time to the first answer, the server process's own
CPU (its Python), and its tree's (its own and every child's, the sandbox's probe and a Node
runner included, whether still running or reaped).

Run:  .venv/bin/python bench/server_start.py [CHECKOUT ...] [--runs 7]
e.g.  .venv/bin/python bench/server_start.py /tmp/base . --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
SLUICE = Path(sys.executable).with_name("sluice")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _cpu(pid: int, children: bool) -> float:
    """CPU seconds of ``pid``; with ``children``, also of its reaped children."""
    try:
        f = _stat(pid)
    except OSError:
        return 0.0
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks / TICK


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                kids.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(kids.get(pid, []))
    return found


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_once(checkout: Path) -> tuple[float, float, float]:
    """(wall seconds to the first /healthz answer, the server's CPU, its tree's CPU)."""
    with tempfile.TemporaryDirectory(prefix="sluice-start-") as data:
        port = _port()
        env = {
            **os.environ,
            "PYTHONPATH": str(checkout / "src"),
            "SLUICE_DATA_DIR": data,
            "SLUICE_PORT": str(port),
        }
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(SLUICE), "serve", "--host", "127.0.0.1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = started + 120
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"sluice serve exited ({proc.returncode}) in {checkout}")
                with contextlib.suppress(httpx.TransportError):  # not listening yet
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).is_success:
                        break
                if time.perf_counter() > deadline:
                    raise RuntimeError("no /healthz answer in 120 s")
                time.sleep(0.01)
            wall = time.perf_counter() - started
            own = _cpu(proc.pid, children=False)
            tree = sum(_cpu(p, children=True) for p in _tree(proc.pid))
        finally:
            proc.terminate()
            proc.wait(60)
    return wall, own, tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="*", default=["."])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    checkouts = [Path(c).resolve() for c in args.checkouts]
    figures: dict[Path, list[tuple[float, float, float]]] = {c: [] for c in checkouts}
    for _ in range(args.runs):
        for checkout in checkouts:  # alternated: the machine's drift hits each alike
            figures[checkout].append(start_once(checkout))
    for checkout, runs in figures.items():
        print(checkout)
        for name, i in (("wall to /healthz", 0), ("server CPU", 1), ("tree CPU", 2)):
            values = sorted(r[i] for r in runs)
            print(
                f"  {name:17} median {statistics.median(values):.2f} s"
                f"  ({values[0]:.2f}-{values[-1]:.2f}, {len(values)} starts)"
            )


if __name__ == "__main__":
    main()
