"""Goal 1 of issue 29 (a webhook workflow at c=64 >= Node-RED's requests/s): what a design that
keeps Sluice's isolation can reach at best, measured beside Node-RED in the same run.

``bench/_floor.mjs`` answers side_by_side.py's request with its one step's result, storing
nothing, from an HTTP front in Node: the step ``inline`` in the front's thread, in a ``vm``
context (as Node-RED's function node), in a ``worker`` thread (a realm of its own), in a worker
of another ``process`` (a runner per account, as Sluice's), or that and each run ``stored``
(SQLite, one transaction a loop turn's runs, by a Python writer) before its answer. Every hop
carries a loop turn's worth of runs in one message. On Python's side: the bare Starlette app
(``starlette``), and ``asgi`` (``_floor_asgi.py``): Sluice's shape, uvicorn handing each body
to a Node runner process and storing the results in SQLite before answering, with nothing of
Sluice's engine between. Sluice's own workflow (HTTP trigger, the same step, ``$.respond``,
the run stored) runs beside them. Every server is pinned to CPU 0
with its children, wrk to CPU 1 (side_by_side.py's way); the systems alternate each round.

Run:  .venv/bin/python bench/isolation_floor.py [--seconds 5] [--rounds 3] [--conc 64]
      [--only nodered,inline,vm,worker,process,stored,starlette,asgi,sluice]
Prints each system's req/s per round, then the worst round's ratio to Node-RED's in the same
round; writes bench/results/isolation_floor.json. Needs wrk and taskset (side_by_side.py), and
Node-RED (installed on first use there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT.parent / "shared" / "bench"))
sys.path.insert(0, str(HERE))

import side_by_side as sbs  # noqa: E402
from _server import environment, write_results  # noqa: E402

MODES = ("inline", "vm", "worker", "process", "stored")
#: Python's side: the bare Starlette app (side_by_side.py's), and Sluice's shape without its
#: engine (``_floor_asgi.py``: uvicorn, a Node runner process, SQLite, a loop turn a batch).
PYTHON = ("starlette", "asgi")


def start_floor(mode: str) -> tuple[sbs.Proc, str]:
    port = sbs.free_port()
    db = Path(tempfile.mkdtemp(prefix="floor-")) / "runs.db"
    env = {**os.environ, "FLOOR_PYTHON": sys.executable}
    proc = sbs.Proc(["node", str(HERE / "_floor.mjs"), mode, str(port), str(db)], env=env)
    url = f"http://127.0.0.1:{port}/hook"
    sbs.wait_up(url)
    return proc, url


def start(name: str) -> tuple[sbs.Proc, str]:
    if name == "nodered":
        proc, url, _ = sbs.start_nodered(ROOT)
        return proc, url
    if name == "starlette":
        sbs.VENV = ROOT / ".venv"
        proc, url, _ = sbs.start_starlette(ROOT)
        return proc, url
    if name == "asgi":
        port = sbs.free_port()
        db = Path(tempfile.mkdtemp(prefix="floor-")) / "runs.db"
        proc = sbs.Proc([sys.executable, str(HERE / "_floor_asgi.py"), str(port), str(db)])
        url = f"http://127.0.0.1:{port}/hook"
        sbs.wait_up(url)
        return proc, url
    if name == "sluice":
        sbs.VENV = ROOT / ".venv"
        proc, url, _ = sbs.start_sluice(ROOT, "workflow")
        return proc, url
    return start_floor(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conc", default="64")
    parser.add_argument("--only", default=",".join(("nodered", *MODES, *PYTHON, "sluice")))
    args = parser.parse_args()
    names = args.only.split(",")
    conc = [int(c) for c in args.conc.split(",")]
    if "nodered" not in names:
        raise SystemExit("--only must include nodered: every ratio is to it")
    figures: dict[tuple[str, int], list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        for name in names:
            proc, url = start(name)
            try:
                sbs.wrk(url, 4, 2)  # warm-up
                for c in conc:
                    r = sbs.wrk(url, c, args.seconds)
                    if r["non2xx"] or r["errors"]:
                        print(f"  {name} c={c}: non-2xx {r['non2xx']} errors {r['errors']!r}")
                    figures.setdefault((name, c), []).append(r["rps"])
                    print(
                        f"round {round_no} {name:8s} c={c:<3d} {r['rps']:8.0f} req/s"
                        f"  p50 {r['p50']:6.2f} ms  p99 {r['p99']:6.2f} ms",
                        flush=True,
                    )
            finally:
                proc.stop()
    print("\nratio to Node-RED, each round (worst first):")
    by_ratio: dict[str, list[float]] = {}
    for c in conc:
        base = figures[("nodered", c)]
        for name in names:
            if name == "nodered":
                continue
            ratios = sorted(x / b for x, b in zip(figures[(name, c)], base, strict=True))
            by_ratio[f"{name}@{c}"] = ratios
            print(f"  c={c:<3d} {name:8s} " + ", ".join(f"{r:.2f}" for r in ratios))
    out = write_results(
        "isolation_floor",
        {
            "rps": {f"{name}@{c}": rps for (name, c), rps in figures.items()},
            "ratio_to_nodered": by_ratio,
            "env": environment(),
        },
    )
    print(f"results: {out}")


if __name__ == "__main__":
    main()
