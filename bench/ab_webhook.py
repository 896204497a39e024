"""A/B of the webhook workflow (HTTP trigger, 1 code step, ``$.respond``) between checkouts, in
one run: throughput, latency and the CPU per request of the server and of its Node runner.

Each checkout's ``src`` is put first on ``PYTHONPATH`` and run with this checkout's venv (so a
base commit needs only ``git worktree add /tmp/base <commit>``). The servers are started by
``../shared/bench/side_by_side.py`` (pinned to CPU 0, wrk on CPU 1, the same JSON POST); the
checkouts alternate ``--rounds`` times, each at every concurrency for ``--seconds``. CPU comes
from ``/proc/<pid>/stat`` of the server and its Node runner over the measured window.

Run:  .venv/bin/python bench/ab_webhook.py /tmp/base . [--conc 1,64] [--seconds 5] [--rounds 2]
      [--postgres postgresql://postgres@127.0.0.1:5432/postgres]  (a fresh database a server)
Needs wrk (apt-get install wrk) and taskset.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "shared" / "bench"))

import side_by_side as sbs  # noqa: E402

sys.path.insert(0, str(HERE.parent))
from bench._server import create_database, drop_database  # noqa: E402


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each process of the tree, by command name (summed)."""
    out = subprocess.run(
        ["ps", "-o", "pid=,ppid=,comm=", "-e"], capture_output=True, text=True
    ).stdout
    kids: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for line in out.splitlines():
        p, pp, comm = line.split(None, 2)
        kids.setdefault(int(pp), []).append(int(p))
        names[int(p)] = comm
    found: dict[str, float] = {}
    stack = [pid]
    while stack:
        p = stack.pop()
        stack += kids.get(p, [])
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        name = "node" if names.get(p) == "node" else "server"
        found[name] = found.get(name, 0.0) + seconds
    return found


def measure(checkout: Path, conc: list[int], seconds: int) -> list[str]:
    os.environ["PYTHONPATH"] = str(checkout / "src")
    server, url, _ = sbs.start_sluice(checkout, "workflow")
    lines = []
    try:
        sbs.wrk(url, 4, 2)  # warm-up
        for c in conc:
            before = tree_cpu(server.p.pid)
            r = sbs.wrk(url, c, seconds)
            after = tree_cpu(server.p.pid)
            n = max(1.0, r["rps"] * seconds)
            cpu = {k: (after[k] - before.get(k, 0.0)) / n * 1e6 for k in after}
            lines.append(
                f"{checkout.name:12s} c={c:<3d} {r['rps']:8.0f} req/s  p50 {r['p50']:8.2f} ms"
                f"  p99 {r['p99']:8.2f} ms  server {cpu.get('server', 0):6.0f} us/req"
                f"  node {cpu.get('node', 0):5.0f} us/req  non2xx {r['non2xx']}"
            )
    finally:
        server.stop()
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("checkouts", nargs="+")
    ap.add_argument("--conc", default="1,64")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--postgres", default="", help="an admin URL: each server a fresh database")
    args = ap.parse_args()
    sbs.VENV = HERE.parent / ".venv"
    conc = [int(c) for c in args.conc.split(",")]
    for round_no in range(args.rounds):
        for checkout in args.checkouts:
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"== round {round_no + 1}, load {load}", flush=True)
            url = asyncio.run(create_database(args.postgres)) if args.postgres else None
            if url is not None:
                os.environ["SLUICE_DATABASE_URL"] = url
            try:
                for line in measure(Path(checkout).resolve(), conc, args.seconds):
                    print(line, flush=True)
            finally:
                if url is not None:
                    asyncio.run(drop_database(args.postgres, url))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
