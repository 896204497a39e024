"""Sustained source pipeline: open-loop request rates against an HTTP source, each accepted
request run and its event stored; the lag from the request to the stored event, per rate.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite unless ``--postgres``),
pinned to CPU 0 (``sched_setaffinity``: the Node runner it starts inherits it), with one
source whose ``run(event)`` emits ``event.body``. The load runs on CPU 1: for each rate R of
``--rates`` the client sends R requests a second for ``--seconds`` on ``--connections``
keep-alive connections, each request at its scheduled time (open loop: a late server makes
later requests late, and the lag counts from the *scheduled* time, so nothing hides a
backlog). Each body carries its sequence number. After the window the bench waits (at most
``--drain`` seconds) for the queue to empty, then reads every stored event of the source:

  acked     requests answered 2xx          stored  events stored for them (exactly once?)
  lag       event ``ts_ms`` (its commit) - the request's scheduled time: p50, p99, max
  ok        p99 lag <= 1 s, every acked request stored once, and nothing still queued
  stored/s  events stored for the rate, over its window and its drain (the run rate when the
            rate is above it: PostgreSQL's drain)
  drained/s events stored after the window, over the drain (the worker's rate with no
            requests to take: requests first holds it back during the window)

The goal (issue 15): the highest rate that is ok, held 60 s, at least 5,000 events/s.

Run:  .venv/bin/python bench/pipeline.py [--rates 1000,2000,3000,5000] [--seconds 60]
      [--postgres postgresql://postgres@127.0.0.1:5432/postgres]   (a fresh database there)
      .venv/bin/python bench/pipeline.py --quick      (a few seconds, two low rates)
Results: printed table, and bench/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._server import (
    Server,
    api,
    create_database,
    drop_database,
    environment,
    percentile,
    table,
    write_results,
)

EMITTER = (
    "export default { name: 'pipe', version: '0.0.1', props: { http: '$.interface.http' },"
    " async run(event) { this.$emit(event.body) } }"
)


@dataclass
class Load:
    #: Scheduled send time (perf_counter seconds) of each request, by its sequence number.
    scheduled: dict[int, float] = field(default_factory=dict)
    acked: list[int] = field(default_factory=list)
    refused: int = 0
    errors: int = 0
    late_s: list[float] = field(default_factory=list)


async def _connection(port: int, path: str, times: list[tuple[int, float]], load: Load) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    try:
        for seq, at in times:
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                load.late_s.append(-delay)
            body = b'{"i":%d}' % seq
            writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            answer = await reader.readuntil(b"\r\n\r\n")
            lower = answer.lower()
            at_len = lower.find(b"content-length:")
            length = int(lower[at_len + 15 : lower.find(b"\r\n", at_len)]) if at_len >= 0 else 0
            await reader.readexactly(length)
            if 200 <= int(answer[9:12]) < 300:
                load.acked.append(seq)
            else:
                load.refused += 1
    except (OSError, asyncio.IncompleteReadError):
        load.errors += 1
    finally:
        writer.close()


async def drive(port: int, path: str, rate: int, seconds: float, first: int, conns: int) -> Load:
    """``rate`` requests a second for ``seconds``, round robin over ``conns`` connections."""
    load = Load()
    count = int(rate * seconds)
    start = time.perf_counter() + 0.2
    wall0 = time.time() + 0.2
    per: list[list[tuple[int, float]]] = [[] for _ in range(conns)]
    for k in range(count):
        at = start + k / rate
        seq = first + k
        load.scheduled[seq] = wall0 + k / rate  # wall clock, to compare with ts_ms
        per[k % conns].append((seq, at))
    await asyncio.gather(*(_connection(port, path, times, load) for times in per))
    return load


#: The server's PostgreSQL database (``--postgres``); None: its SQLite file.
PG_URL: str | None = None


def _pg(query: str, *args: Any) -> list[Any]:
    import asyncpg

    async def run() -> list[Any]:
        conn = await asyncpg.connect(PG_URL, timeout=10)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def _queue(db: Path) -> dict[str, int]:
    if PG_URL is not None:
        return {r[0]: r[1] for r in _pg("SELECT status, count(*) FROM jobs GROUP BY status")}
    with sqlite3.connect(db, timeout=30) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())


def wait_drained(db: Path, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        counts = _queue(db)
        if not counts.get("queued") and not counts.get("running"):
            return counts
        if time.monotonic() > deadline:
            return counts
        time.sleep(0.2)


def stored(db: Path, source_id: str) -> list[tuple[int, int]]:
    """(sequence number, ts_ms) of each stored event of the source."""
    if PG_URL is not None:
        rows = _pg(
            "SELECT payload::text, ts_ms FROM events WHERE emitter_id = $1 AND channel = ''",
            source_id,
        )
        return [(int(json.loads(p)["i"]), int(ts)) for p, ts in rows]
    with sqlite3.connect(db, timeout=30) as conn:
        rows = conn.execute(
            "SELECT payload, ts_ms FROM events WHERE emitter_id = ? AND channel = ''",
            (source_id,),
        ).fetchall()
    return [(int(json.loads(p)["i"]), int(ts)) for p, ts in rows]


def measure_rate(
    server: Server, path: str, source_id: str, rate: int, args: argparse.Namespace, first: int
) -> dict[str, Any]:
    db = server.data_dir / "sluice.db"
    load = asyncio.run(drive(server.port, path, rate, args.seconds, first, args.connections))
    drained_at, window_end_ms = time.monotonic(), time.time() * 1000
    left = wait_drained(db, args.drain)
    drain_s = time.monotonic() - drained_at
    events = {seq: ts for seq, ts in stored(db, source_id) if seq in load.scheduled}
    seqs = [seq for seq, _ in stored(db, source_id) if seq in load.scheduled]
    lags = [events[s] - load.scheduled[s] * 1000 for s in load.acked if s in events]
    missing = len(set(load.acked) - set(events))
    p99 = percentile(lags, 99) if lags else float("nan")
    still = left.get("queued", 0) + left.get("running", 0)
    return {
        "rate": rate,
        "seconds": args.seconds,
        "acked": len(load.acked),
        "refused": load.refused,
        "errors": load.errors,
        "sent_late_p99_ms": round(percentile(load.late_s, 99) * 1000, 1) if load.late_s else 0.0,
        "stored": len(seqs),
        "missing": missing,
        "doubled": len(seqs) - len(set(seqs)),
        "lag_p50_ms": round(percentile(lags, 50), 1) if lags else None,
        "lag_p99_ms": round(p99, 1) if lags else None,
        "lag_max_ms": round(max(lags), 1) if lags else None,
        "drain_s": round(drain_s, 1),
        # Runs stored a second, from the first request to the end of the drain.
        "stored_per_s": round(len(seqs) / (args.seconds + drain_s), 1),
        # ... and after the load's window only (the worker alone, no requests to take).
        "drained_per_s": round(
            sum(1 for s in load.acked if events.get(s, 0) > window_end_ms) / drain_s, 1
        )
        if drain_s
        else None,
        "still_queued": still,
        "ok": bool(lags) and p99 <= 1000 and missing == 0 and still == 0 and not load.errors,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rates", default="1000,2000,3000,5000")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--drain", type=float, default=120.0, help="seconds to wait for the queue")
    ap.add_argument("--quick", action="store_true", help="500 and 1000 req/s, 5 s each")
    ap.add_argument("--env", action="append", default=[], help="SLUICE_X=v for the server")
    ap.add_argument(
        "--postgres",
        metavar="URL",
        help="run Sluice on a fresh database of this PostgreSQL server (dropped after)",
    )
    args = ap.parse_args()
    if args.postgres:
        global PG_URL
        PG_URL = asyncio.run(create_database(args.postgres))
        try:
            return _main(args)
        finally:
            asyncio.run(drop_database(args.postgres, PG_URL))
    return _main(args)


def _main(args: argparse.Namespace) -> int:
    if args.quick:
        args.rates, args.seconds, args.drain = "500,1000", 5.0, 60.0
    env = {"SLUICE_HTTP_RATE_PER_SECOND": "0", "SLUICE_EVENT_RETENTION": "10000000"}
    env.update(dict(kv.split("=", 1) for kv in args.env))
    if PG_URL is not None:
        env["SLUICE_DATABASE_URL"] = PG_URL
    rows: list[dict[str, Any]] = []
    with Server(env=env) as server:
        os.sched_setaffinity(server.pid, {0})  # before the Node runner starts: it inherits it
        os.sched_setaffinity(0, {1})
        account = server.create_account("bench")
        with server.client(account) as client:
            source = api(client, "POST", "/v1/sources", {"component_code": EMITTER, "name": "p"})
        path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
        asyncio.run(drive(server.port, path, 200, 2, 10_000_000, 8))  # warm-up
        wait_drained(server.data_dir / "sluice.db", args.drain)
        first = 0
        for rate in (int(r) for r in args.rates.split(",")):
            row = measure_rate(server, path, source["id"], rate, args, first)
            first += int(rate * args.seconds) + 1
            rows.append(row)
            print(json.dumps(row), flush=True)
    keys = ["rate", "acked", "stored", "missing", "doubled", "lag_p50_ms", "lag_p99_ms",
            "lag_max_ms", "drain_s", "stored_per_s", "drained_per_s", "still_queued",
            "ok"]  # fmt: skip
    print(table(keys, [[row[k] for k in keys] for row in rows]))
    passed = [row["rate"] for row in rows if row["ok"]]
    print(
        f"highest rate with every event run and stored within 1 s (p99): {max(passed, default=0)}"
    )
    write_results("pipeline", {"environment": environment(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
