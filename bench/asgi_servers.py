"""Is Python's HTTP layer the floor of a source's ingestion? The same Sluice app and the same
bare app (bench/_bare_app.py) under uvicorn (what ``sluice serve`` runs) and under granian (a
Rust HTTP server for ASGI apps), alternated in one run (issue 29: "try a faster ASGI server
... choose by the numbers").

What it does: a ``sluice serve`` on a fresh data dir gets an account and bench/ingest.py's
emitter source (``this.$emit(event.body)``, default answer), then stops. Each round then starts,
in turn, the bare app under uvicorn, Sluice under uvicorn (``sluice serve``), the bare app
under granian and Sluice under granian (the app ``sluice serve`` builds, ``create_app``, on
the same data dir), each on a fresh port. For each: ``wrk -c<C>`` for 2 s of warm-up (then
Sluice's queue drained), then for ``--seconds`` measured, every process of the server (its
Node runner and granian's threads included) on CPU 0 and wrk on CPU 1. Figures: requests a
second and p50 (wrk), the server tree's CPU per request over the window, and for Sluice the
drain after the window (seconds, CPU per request) and ``sustained`` = requests / (window +
drain): ingestion that leaves its runs for later reads high on requests/s alone.

Every request wrk counted must become one stored event: the events stored over the warm-up,
window and drain are checked against wrk's counts (wrk does not count the requests still in
flight when it stops, at most C per run: ``extra`` is that, never a loss).

``--role api`` starts both Sluices with ``SLUICE_ROLE=api``: they accept and store the
requests as jobs and run none (no drain), which is the HTTP layer plus Sluice's own ingest
path alone. With ``--interleave N`` (``--role api`` only, the two uvicorn servers) each round
starts the bare app and Sluice together and measures them in N alternating slices of
``--seconds``/N (at least 1 s each; which goes first rotates), summed: a spell of the
machine's noise then falls on both, not on one server's whole window. ``--also CHECKOUT``
adds a third, Sluice from ``CHECKOUT/src`` (``sluice-also``): a change against its base
commit in the same slices.

``--role split`` adds beside each a ``sluice serve --role worker`` process (``nice
10``, every process of it on CPU 1 with wrk) that runs the jobs while the requests come: the
runs on another core, as docs/deploy.md's roles deploy them; ``runs_per_s`` is the events it
stored during the window.

Needs wrk, and granian for its two servers. granian is not a dependency of Sluice: install it
beside the venv, e.g. ``.venv/bin/pip install --target /tmp/granian granian`` (then delete the
``click`` it brings, which would shadow the venv's), and pass ``--granian-path /tmp/granian``;
without it only the two uvicorn servers run (goal 3's own figure: Sluice against the bare app).

Run:  .venv/bin/python bench/asgi_servers.py [--granian-path /tmp/granian]
      [--role all|api|split] [--rounds 3] [--seconds 8] [--concurrency 64] [--interleave N]
      [--postgres postgresql://postgres@127.0.0.1:5432/postgres]   (a fresh database there)
      [--interleave 5 --also /work/wt-base]   (--role api: a change against its base)
Results: printed rows, and bench/results/asgi_servers.json.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _server import (
    BENCH_DIR,
    SLUICE,
    Server,
    api,
    create_database,
    descendants,
    drop_database,
    environment,
    free_port,
    write_results,
    wrk_post,
)
from ingest import EMITTER, _pg, cpu_seconds, wait_drained, wait_drained_pg

KINDS = ("bare-uvicorn", "sluice-uvicorn", "bare-granian", "sluice-granian")
#: Where the factory module granian imports is written.
GENERATED = BENCH_DIR / "results"
#: The factory granian imports: the app ``sluice serve`` runs, from the same SLUICE_* settings.
FACTORY = """
from sluice import logs
from sluice.api.app import create_app
from sluice.config import Settings


def make():
    settings = Settings.from_env()
    logs.configure(settings.log_level, settings.log_format)
    return create_app(settings)
"""


def events(db: Path | str) -> int:
    """Events stored: ``db`` is the SQLite file, or a PostgreSQL URL (``--postgres``)."""
    if isinstance(db, str):
        return int(_pg(db, lambda c: c.fetchval("SELECT count(*) FROM events")))
    with sqlite3.connect(db, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def drained(db: Path | str) -> None:
    """Until no job of the server's is queued or running."""
    if isinstance(db, str):
        wait_drained_pg(db, 600)
    else:
        wait_drained(db, 600)


def start(kind: str, env: dict[str, str], data_dir: Path, args: argparse.Namespace) -> Any:
    port = free_port()
    env = dict(env)
    granian = [sys.executable, "-m", "granian", "--interface", "asgi", "--workers", "1"]
    granian += ["--runtime-threads", "1", "--loop", "uvloop", "--no-ws", "--log-level", "warning"]
    granian += ["--host", "127.0.0.1", "--port", str(port)]
    if kind in ("sluice-uvicorn", "sluice-also"):
        cmd = [str(SLUICE), "serve", "--host", "127.0.0.1", "--port", str(port)]
        if kind == "sluice-also":
            env["PYTHONPATH"] = str(Path(args.also) / "src")
    elif kind == "sluice-granian":
        cmd = [*granian, "--factory", "asgi_servers_app:make"]
        env["PYTHONPATH"] = f"{args.granian_path}:{GENERATED}"
    elif kind == "bare-uvicorn":
        cmd = [sys.executable, str(BENCH_DIR / "_bare_app.py"), str(port)]
    else:
        cmd = [*granian, "_bare_app:app"]
        env["PYTHONPATH"] = f"{args.granian_path}:{BENCH_DIR}"
    log = (data_dir / f"{kind}.log").open("ab")
    proc = subprocess.Popen(cmd, env=env, cwd=data_dir, stdout=log, stderr=log)
    probe = f"http://127.0.0.1:{port}" + ("/" if kind.startswith("bare") else "/openapi.json")
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited: see {data_dir / (kind + '.log')}")
        try:
            httpx.get(probe, timeout=2)
            return proc, port
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start in 60 s") from None
            time.sleep(0.1)


def start_worker(env: dict[str, str], data_dir: Path) -> subprocess.Popen[bytes]:
    """``--role split``'s job worker: ``sluice serve --role worker`` on the same data dir."""
    return subprocess.Popen(
        ["nice", "-n", "10", str(SLUICE), "serve", "--role", "worker"],
        env={**env, "SLUICE_ROLE": "worker"},
        cwd=data_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def interleaved(
    round_: int, env: dict[str, str], data_dir: Path, path: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One round of ``--interleave``: the bare app and Sluice (``--role api``) up together,
    measured in alternating slices; their sums, one row each."""
    kinds: tuple[str, ...] = ("bare-uvicorn", "sluice-uvicorn")
    if args.also:
        kinds += ("sluice-also",)
    procs = {kind: start(kind, env, data_dir, args) for kind in kinds}
    urls = {
        kind: f"http://127.0.0.1:{port}" + (path if kind.startswith("sluice") else "/")
        for kind, (_proc, port) in procs.items()
    }
    sums: dict[str, dict[str, Any]] = {
        kind: {"requests": 0, "cpu": 0.0, "rps": [], "p50": [], "p99": [], "non_2xx": 0}
        for kind in kinds
    }
    seconds = max(1, round(args.seconds / args.interleave))
    try:
        for kind in kinds:
            wrk_post(urls[kind], '{"i":1}', seconds=2, concurrency=args.concurrency)
            pin(procs[kind][0].pid, 0)
        for slice_ in range(args.interleave):
            turn = slice_ % len(kinds)  # who goes first rotates
            for kind in kinds[turn:] + kinds[:turn]:
                pid = procs[kind][0].pid
                cpu0 = cpu_seconds(pid)
                cell = wrk_post(
                    urls[kind], '{"i":1}', seconds=seconds, concurrency=args.concurrency
                )
                total = sums[kind]
                total["cpu"] += cpu_seconds(pid) - cpu0
                total["requests"] += cell["requests"]
                total["non_2xx"] += cell["non_2xx"]
                total["rps"].append(cell["rps"])
                total["p50"].append(cell["p50_ms"])
                total["p99"].append(cell["p99_ms"])
    finally:
        for proc, _port in procs.values():
            proc.terminate()
            proc.wait(60)
    rows = []
    for kind in kinds:
        total = sums[kind]
        row = {
            "round": round_,
            "kind": kind,
            "requests": total["requests"],
            "rps": sum(total["rps"]) / len(total["rps"]),
            "non_2xx": total["non_2xx"],
            "p50_ms": sorted(total["p50"])[len(total["p50"]) // 2],
            "p99_ms": max(total["p99"]),
            "cpu_us": total["cpu"] / max(total["requests"], 1) * 1e6,
            "slices": args.interleave,
        }
        rows.append(row)
        shown = {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}
        print(shown, flush=True)
    return rows


def pin(root: int, cpu: int) -> None:
    """Every thread of ``root`` and of its descendants (its Node runners) on CPU ``cpu``."""
    for pid in [root, *descendants(root)]:
        subprocess.run(["taskset", "-apc", str(cpu), str(pid)], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--granian-path", help="granian's folder (else uvicorn only)")
    parser.add_argument("--role", choices=("all", "api", "split"), default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--postgres", help="an admin URL: the servers on a fresh database there (else SQLite)"
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        help="--role api: both servers up at once, measured in N alternating slices",
    )
    parser.add_argument(
        "--also",
        metavar="CHECKOUT",
        help="--interleave: a third server, Sluice from CHECKOUT/src (e.g. a git worktree of "
        "the base commit), in the same slices: a change measured against its base in one run",
    )
    args = parser.parse_args()
    if args.interleave and (args.role != "api" or args.granian_path):
        parser.error("--interleave is for --role api with the two uvicorn servers")
    if args.also and not args.interleave:
        parser.error("--also needs --interleave")
    if not args.postgres:
        run(args, None)
        return
    url = asyncio.run(create_database(args.postgres))
    try:
        run(args, url)
    finally:
        asyncio.run(drop_database(args.postgres, url))


def run(args: argparse.Namespace, database_url: str | None) -> None:
    GENERATED.mkdir(parents=True, exist_ok=True)
    (GENERATED / "asgi_servers_app.py").write_text(FACTORY)
    env = {
        "SLUICE_HTTP_RATE_PER_SECOND": "0",
        "SLUICE_SHED_BACKLOG_SECONDS": "0",
        "SLUICE_EVENT_RETENTION": "100000000",
        "SLUICE_STORAGE_QUOTA_MB": "100000",
    }
    if database_url:
        env["SLUICE_DATABASE_URL"] = database_url
    server = Server(env=env, keep=True)
    server.start()
    try:
        with server.client(server.create_account("bench")) as client:
            source = api(client, "POST", "/v1/sources", {"component_code": EMITTER, "name": "s"})
    finally:
        server.stop()
    path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
    data_dir = server.data_dir
    db: Path | str = database_url or data_dir / "sluice.db"
    kinds = KINDS if args.granian_path else tuple(k for k in KINDS if k.endswith("uvicorn"))
    run_env = server._env()
    if args.role in ("api", "split"):
        # The split worker has no in-process wake-up from the API process: it polls.
        run_env.update({"SLUICE_ROLE": "api", "SLUICE_JOB_POLL_SECONDS": "0.05"})
    rows: list[dict[str, Any]] = []
    for round_ in range(args.rounds if args.interleave else 0):
        rows += interleaved(round_, run_env, data_dir, path, args)
    for round_ in range(0 if args.interleave else args.rounds):
        for kind in kinds:
            sluice = kind.startswith("sluice")
            proc, port = start(kind, run_env, data_dir, args)
            worker = start_worker(run_env, data_dir) if sluice and args.role == "split" else None
            try:
                url = f"http://127.0.0.1:{port}" + (path if sluice else "/")
                before = events(db) if sluice else 0
                warm = wrk_post(url, '{"i":1}', seconds=2, concurrency=args.concurrency)
                if sluice and args.role != "api":
                    drained(db)
                pin(proc.pid, 0)
                if worker is not None:
                    pin(worker.pid, 1)
                ran = events(db) if worker is not None else 0
                cpu0 = cpu_seconds(proc.pid)
                cell = wrk_post(url, '{"i":1}', seconds=args.seconds, concurrency=args.concurrency)
                cpu1 = cpu_seconds(proc.pid)
                row: dict[str, Any] = {"round": round_, "kind": kind, **cell}
                row["cpu_us"] = (cpu1 - cpu0) / max(cell["requests"], 1) * 1e6
                if worker is not None:
                    row["runs_per_s"] = (events(db) - ran) / args.seconds
                if sluice and args.role != "api":
                    drain_started = time.perf_counter()
                    drained(db)
                    row["drain_s"] = time.perf_counter() - drain_started
                    if worker is None:  # split: the API process has nothing to drain
                        row["drain_cpu_us"] = (
                            (cpu_seconds(proc.pid) - cpu1) / max(cell["requests"], 1) * 1e6
                        )
                    row["sustained_rps"] = cell["requests"] / (args.seconds + row["drain_s"])
                    extra = events(db) - before - warm["requests"] - cell["requests"]
                    row["extra_events"] = extra
                    if not 0 <= extra <= 2 * args.concurrency:
                        print(f"  !! {kind}: {extra} events against wrk's counts", flush=True)
            finally:
                for running in (proc, worker):
                    if running is not None:
                        running.terminate()
                        running.wait(60)
            rows.append(row)
            shown = {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}
            print(shown, flush=True)
    ratios: dict[str, list[float]] = {}
    if args.also:
        kinds = (*kinds, "sluice-also")
    for round_ in range(args.rounds):
        by = {r["kind"]: r for r in rows if r["round"] == round_}
        for kind in kinds[1:]:
            if kind not in by:
                continue
            ratios.setdefault(kind, []).append(by[kind]["rps"] / by["bare-uvicorn"]["rps"])
    print("requests/s against the bare app under uvicorn, by round (worst first):")
    for kind, values in ratios.items():
        print(f"  {kind:15} " + "  ".join(f"{v:.2f}" for v in sorted(values)))
    out = write_results(
        "asgi_servers",
        {
            "role": args.role,
            "postgres": bool(database_url),
            "interleave": args.interleave,
            "rows": rows,
            "ratios": ratios,
            "env": environment(),
        },
    )
    print(f"results: {out}")


if __name__ == "__main__":
    main()
