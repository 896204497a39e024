"""A burst against one HTTP source: the SQLite WAL's size and the queue's lag (the oldest due
job's age) while it lasts and while the queue drains, with the checkpointer and load shedding
on, against a baseline with both off, on fresh servers in the same run.

    .venv/bin/python bench/wal_burst.py [--rate 2000] [--seconds 60] [--rounds 3]

The load is open-loop (``pipeline.drive``: each request has its send time; a refused one is
not sent again), on loopback only, bounded in count and time. Every acknowledged request is
checked against the stored events once the queue has drained.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _server
from bench.pipeline import EMITTER, drive

#: The queue must drain within this after the load, else the round is reported as not drained.
DRAIN_TIMEOUT_S = 300.0


@dataclass
class Samples:
    wal_bytes: list[int] = field(default_factory=list)
    lag_s: list[float] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)


def _read_queue(db: Path) -> tuple[float, int, int]:
    """(oldest due job's age s, queued, running), read from the file as a second process."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        now = time.time_ns() // 1_000_000
        oldest, queued = conn.execute(
            "SELECT min(run_after_ms), count(*) FROM jobs WHERE status = 'queued'"
            " AND run_after_ms <= ?",
            (now,),
        ).fetchone()
        (running,) = conn.execute("SELECT count(*) FROM jobs WHERE status = 'running'").fetchone()
    finally:
        conn.close()
    return (0.0 if oldest is None else (now - oldest) / 1000, int(queued), int(running))


def _sample(db: Path, samples: Samples, stop: threading.Event) -> None:
    wal = Path(f"{db}-wal")
    while not stop.wait(0.5):
        try:
            samples.wal_bytes.append(wal.stat().st_size if wal.exists() else 0)
            lag, queued, _ = _read_queue(db)
            samples.lag_s.append(lag)
            samples.queued.append(queued)
        except sqlite3.Error:
            pass


def one(env: dict[str, str], rate: int, seconds: float) -> dict[str, Any]:
    base = {"SLUICE_HTTP_RATE_PER_SECOND": "0", "SLUICE_EVENT_RETENTION": "10000000"}
    with _server.Server(env={**base, **env}) as server:
        account = server.create_account()
        with server.client(account) as client:
            source = _server.api(client, "POST", "/v1/sources", {"component_code": EMITTER})
        path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
        db = server.data_dir / "sluice.db"
        samples, stop = Samples(), threading.Event()
        sampler = threading.Thread(target=_sample, args=(db, samples, stop), daemon=True)
        sampler.start()
        load = asyncio.run(drive(server.port, path, rate, seconds, 0, 64))
        load_end = len(samples.wal_bytes)
        drained_at = time.monotonic()
        deadline = drained_at + DRAIN_TIMEOUT_S
        drained = False
        while time.monotonic() < deadline:
            _, queued, running = _read_queue(db)
            if queued == 0 and running == 0:
                drained = True
                break
            time.sleep(0.5)
        drain_s = time.monotonic() - drained_at
        stop.set()
        sampler.join()
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        stored = [
            json.loads(p)["i"]
            for (p,) in conn.execute(
                "SELECT payload FROM events WHERE emitter_id = ?", (source["id"],)
            )
        ]
        conn.close()
        wal_after = Path(f"{db}-wal").stat().st_size if Path(f"{db}-wal").exists() else 0
        return {
            "acked": len(load.acked),
            "refused": load.refused,
            "errors": load.errors,
            "stored": len(stored),
            "missing": len(set(load.acked) - set(stored)),
            "doubled": len(stored) - len(set(stored)),
            "peak_wal_mib": max(samples.wal_bytes, default=0) / 2**20,
            "peak_wal_burst_mib": max(samples.wal_bytes[:load_end], default=0) / 2**20,
            "wal_after_mib": wal_after / 2**20,
            "peak_lag_s": max(samples.lag_s, default=0.0),
            "peak_queued": max(samples.queued, default=0),
            # Every 0.5 s: (lag s, queued), for a look at how the lag moved.
            "series": [
                (round(lag, 1), queued)
                for lag, queued in zip(samples.lag_s, samples.queued, strict=False)
            ],
            "drained": drained,
            "drain_s": drain_s,
            "db_mib": db.stat().st_size / 2**20,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shed-after", default="10", help="SLUICE_SHED_BACKLOG_SECONDS (on)")
    parser.add_argument("--only", choices=["baseline", "on"], help="one of the two configs")
    parser.add_argument("--quick", action="store_true", help="5 s at 500 req/s, one round")
    args = parser.parse_args()
    if args.quick:
        args.rate, args.seconds, args.rounds = 500, 5.0, 1
    configs = {
        f"checkpoints + shedding at {args.shed_after} s": {
            "SLUICE_SHED_BACKLOG_SECONDS": args.shed_after,
        },
        "baseline (no checkpoints, no shedding)": {
            "SLUICE_SQLITE_CHECKPOINT_SECONDS": "0",
            "SLUICE_SHED_BACKLOG_SECONDS": "0",
        },
    }
    if args.only:
        configs = dict([list(configs.items())[1 if args.only == "baseline" else 0]])
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    for round_ in range(args.rounds):
        for name, env in configs.items():
            result = one(env, args.rate, args.seconds)
            results[name].append(result)
            print(f"round {round_ + 1}, {name}: {json.dumps(result)}", flush=True)
    headers = ["config", "acked", "refused", "missing", "doubled", "peak WAL MiB",
               "WAL after MiB", "peak lag s", "peak queued", "drain s"]  # fmt: skip
    rows = []
    for name, runs in results.items():
        for r in runs:
            rows.append([name, r["acked"], r["refused"], r["missing"], r["doubled"],
                         r["peak_wal_mib"], r["wal_after_mib"], r["peak_lag_s"],
                         r["peak_queued"], r["drain_s"]])  # fmt: skip
    print(_server.table(headers, rows))
    _server.write_results(
        "wal_burst", {"rate": args.rate, "seconds": args.seconds, "results": results}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
