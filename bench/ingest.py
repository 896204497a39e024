"""Ingestion through a source's HTTP endpoint, against a bare Starlette app.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite, the endpoint rate limit
off, event retention raised so no event is trimmed) with one trivial HTTP-interface source
(``run(event) { this.$emit(event.body) }``, no ``customResponse``: the client gets 200 once the
request is stored as a job), and a bare Starlette app answering 200 (bench/_bare_app.py) under
uvicorn with the same settings. For each concurrency (1, 16, 64) the two are driven in turn
for ``--seconds`` after ``--warmup`` seconds, each only once Sluice's job queue is empty (the
runs of the cell before would otherwise take CPU from the target measured next): C keep-alive
connections, each sending ``POST {"i": <unique n>}`` and waiting for the answer. Figures:
requests/s, p50/p99 latency (client wall time), and the ratio Sluice/bare of requests/s (the
issue's figure). CPU used by the client and by each server process tree over the window shows
which side is saturated.

Durability: every request Sluice answered 2xx must become a stored event. After the load, the
job queue is drained (polled in the SQLite file), then the events' payloads are read from the
file (the API serves only the newest 100) and the acknowledged ``i``s checked against them:
missing, duplicated, failed jobs.

The client is a minimal HTTP/1.1 keep-alive client on asyncio streams (``--client raw``, the
default; ~20 µs of client CPU a request). With httpx.AsyncClient (``--client httpx``) the
client saturated a core at ~140 requests/s at c=64 on the 2-core machine, capping both targets
alike: the ratio then says nothing about Sluice (it read 65%).

Goal (from the issue): at least 50% of the bare app's throughput at concurrency 64, with every
acknowledged event stored.

Run:  .venv/bin/python bench/ingest.py [--seconds 5] [--warmup 1] [--concurrency 1,16,64]
Results: printed table, and bench/results/ingest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
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
    print_ratio_table,
    summary,
    write_results,
)

GOAL_RATIO = 0.5

EMITTER = """
export default {
  name: "Ingest",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};
"""


@dataclass
class Cell:
    """One measured window: a target at one concurrency."""

    latencies_ms: list[float] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    refused: int = 0
    #: The non-2xx answers by status and the start of their body (at most 200 bytes).
    refusals: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    seconds: float = 0.0

    def refuse(self, status: int, content: bytes) -> None:
        self.refused += 1
        key = f"{status} {content[:200].decode(errors='replace')}"
        self.refusals[key] = self.refusals.get(key, 0) + 1


class Counter:
    """Unique request numbers across the whole run."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


# ---- clients ----------------------------------------------------------------------------------


async def _raw_connection(
    port: int, path: str, counter: Counter, cell: Cell, deadline: float
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    try:
        while time.perf_counter() < deadline:
            i = counter.next()
            body = b'{"i":%d}' % i
            request = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
            started = time.perf_counter()
            writer.write(request)
            answer = await reader.readuntil(b"\r\n\r\n")
            status = int(answer[9:12])
            lower = answer.lower()
            at = lower.find(b"content-length:")
            length = int(lower[at + 15 : lower.find(b"\r\n", at)]) if at >= 0 else 0
            content = await reader.readexactly(length)
            cell.latencies_ms.append((time.perf_counter() - started) * 1000)
            if 200 <= status < 300:
                cell.acked.append(i)
            else:
                cell.refuse(status, content)
    except (OSError, asyncio.IncompleteReadError):
        cell.errors += 1
    finally:
        writer.close()


async def _httpx_connection(
    client: httpx.AsyncClient, path: str, counter: Counter, cell: Cell, deadline: float
) -> None:
    while time.perf_counter() < deadline:
        i = counter.next()
        started = time.perf_counter()
        try:
            response = await client.post(path, content=b'{"i":%d}' % i)
        except httpx.TransportError:
            cell.errors += 1
            continue
        cell.latencies_ms.append((time.perf_counter() - started) * 1000)
        if 200 <= response.status_code < 300:
            cell.acked.append(i)
        else:
            cell.refuse(response.status_code, response.content)


async def drive(
    kind: str, port: int, path: str, concurrency: int, seconds: float, counter: Counter
) -> Cell:
    cell = Cell()
    started = time.perf_counter()
    deadline = started + seconds
    if kind == "raw":
        await asyncio.gather(
            *(_raw_connection(port, path, counter, cell, deadline) for _ in range(concurrency))
        )
    else:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"content-type": "application/json"},
            limits=httpx.Limits(max_connections=concurrency),
            timeout=60,
        ) as client:
            await asyncio.gather(
                *(
                    _httpx_connection(client, path, counter, cell, deadline)
                    for _ in range(concurrency)
                )
            )
    cell.seconds = time.perf_counter() - started
    return cell


# ---- processes --------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and all its descendants (Node runners), from /proc."""
    total = 0.0
    for p in [pid, *descendants(pid)]:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / 100.0  # utime, stime in clock ticks
    return total


class Bare:
    """bench/_bare_app.py in a subprocess."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH_DIR / "_bare_app.py"), str(self.port)],
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=2) as client:
            while True:
                try:
                    if client.get("/").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the bare app did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- durability -------------------------------------------------------------------------------


def wait_drained(db: Path, timeout: float) -> tuple[float, dict[str, int]]:
    """Seconds until no job is queued or running, and the jobs by status then (with
    ``"backlog"``: the jobs queued or running at the first look)."""
    started = time.perf_counter()
    backlog: int | None = None
    with sqlite3.connect(db, timeout=30) as conn:
        while True:
            counts = dict(
                conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
            )
            left = counts.get("queued", 0) + counts.get("running", 0)
            backlog = left if backlog is None else backlog
            if not left:
                return time.perf_counter() - started, {**counts, "backlog": backlog}
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"the job queue did not drain in {timeout:g} s: {counts}")
            time.sleep(0.2)


def _pg(url: str, fn: Any) -> Any:
    import asyncpg

    async def run() -> Any:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            return await fn(conn)
        finally:
            await conn.close()

    return asyncio.run(run())


def wait_drained_pg(url: str, timeout: float) -> tuple[float, dict[str, int]]:
    """``wait_drained`` on PostgreSQL."""
    started = time.perf_counter()
    backlog: int | None = None
    while True:
        rows = _pg(url, lambda c: c.fetch("SELECT status, count(*) FROM jobs GROUP BY status"))
        counts = {r[0]: r[1] for r in rows}
        left = counts.get("queued", 0) + counts.get("running", 0)
        backlog = left if backlog is None else backlog
        if not left:
            return time.perf_counter() - started, {**counts, "backlog": backlog}
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"the job queue did not drain in {timeout:g} s: {counts}")
        time.sleep(0.2)


def stored_ids_pg(url: str, source_id: str) -> list[int]:
    rows = _pg(
        url, lambda c: c.fetch("SELECT payload FROM events WHERE emitter_id = $1", source_id)
    )
    return [json.loads(r[0])["i"] if isinstance(r[0], str) else r[0]["i"] for r in rows]


def stored_ids(db: Path, source_id: str) -> list[int]:
    with sqlite3.connect(db, timeout=30) as conn:
        rows = conn.execute("SELECT payload FROM events WHERE emitter_id = ?", (source_id,))
        return [json.loads(payload)["i"] for (payload,) in rows]


def measure_cell(
    args: argparse.Namespace,
    name: str,
    port: int,
    path: str,
    pid: int,
    concurrency: int,
    counter: Counter,
) -> tuple[Cell, Cell, dict[str, Any]]:
    """Warm up, then drive one target for ``args.seconds``: (warm-up, measured, its result row,
    printed as it comes). Server CPU counts ``pid`` and its descendants."""
    warm = asyncio.run(drive(args.client, port, path, concurrency, args.warmup, counter))
    cpu_server, cpu_client = cpu_seconds(pid), time.process_time()
    cell = asyncio.run(drive(args.client, port, path, concurrency, args.seconds, counter))
    cpu_server = cpu_seconds(pid) - cpu_server
    cpu_client = time.process_time() - cpu_client
    stats = summary(cell.latencies_ms)
    row = {
        "target": name,
        "concurrency": concurrency,
        "requests": len(cell.latencies_ms),
        "acked": len(cell.acked),
        "refused": cell.refused + warm.refused,
        "refused_in_warmup": warm.refused,
        "refusals": {
            key: warm.refusals.get(key, 0) + cell.refusals.get(key, 0)
            for key in warm.refusals.keys() | cell.refusals.keys()
        },
        "errors": cell.errors + warm.errors,
        "rps": len(cell.latencies_ms) / cell.seconds,
        # Answered 2xx a second: the ingestion (a 503 is an answer, not an event taken).
        "acked_rps": len(cell.acked) / cell.seconds,
        "latency_ms": stats,
        "server_cpu": cpu_server / cell.seconds,
        "client_cpu": cpu_client / cell.seconds,
    }
    print(
        f"  {name:6} c={concurrency:<3} {row['rps']:8.0f} req/s  "
        f"p50 {stats['p50']:6.2f} ms  p99 {stats['p99']:7.2f} ms  "
        f"cpu server {row['server_cpu']:.2f} client {row['client_cpu']:.2f}",
        flush=True,
    )
    for key, count in sorted(row["refusals"].items(), key=lambda kv: -kv[1])[:5]:
        warm_count = warm.refusals.get(key, 0)
        print(f"    {count} ({warm_count} in the warm-up) answered {key}", flush=True)
    return warm, cell, row


# ---- main -------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> dict[str, Any]:
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    env = {
        "SLUICE_HTTP_RATE_PER_SECOND": "0",
        "SLUICE_EVENT_RETENTION": str(args.retention),
        "SLUICE_STORAGE_QUOTA_MB": str(args.storage_quota_mb),
    }
    env.update(dict(item.split("=", 1) for item in args.env))
    counter = Counter()
    acked: list[int] = []
    results: list[dict[str, Any]] = []
    if args.database_url:
        env["SLUICE_DATABASE_URL"] = args.database_url
    if args.roles == "split":
        # The API process only accepts (role api); a second process runs the jobs.
        env.update({"SLUICE_ROLE": "api", "SLUICE_JOB_POLL_SECONDS": "0.05"})
    bare = Bare()
    worker: subprocess.Popen[bytes] | None = None
    try:
        with Server(env=env, keep=args.keep) as server:
            if args.roles == "split":
                worker_env = {**server._env(), "SLUICE_ROLE": "worker"}
                worker = subprocess.Popen(
                    ["nice", "-n", str(args.worker_nice), str(SLUICE), "serve", "--role", "worker"],
                    env=worker_env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=server.data_dir,
                )
            account = server.create_account("bench")
            with server.client(account) as client:
                source = api(
                    client, "POST", "/v1/sources", {"component_code": EMITTER, "name": "ingest"}
                )
            path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
            targets = [
                ("bare", bare.port, "/", bare.proc.pid),
                ("sluice", server.port, path, server.pid),
            ]

            def drained() -> float:
                if args.database_url:
                    return wait_drained_pg(args.database_url, args.drain_timeout)[0]
                return wait_drained(server.data_dir / "sluice.db", args.drain_timeout)[0]

            for concurrency in concurrencies:
                for name, port, target_path, pid in targets:
                    # Sluice's backlog from the cell before runs to its end first: it would
                    # take CPU from whichever target is measured next.
                    waited = drained()
                    if waited > 1:
                        print(f"  (waited {waited:.0f} s for Sluice's queue to drain)", flush=True)
                    warm, cell, row = measure_cell(
                        args, name, port, target_path, pid, concurrency, counter
                    )
                    if name == "sluice":
                        acked += warm.acked + cell.acked
                    results.append(row)
            drain_cpu = cpu_seconds(server.pid)
            if args.database_url:
                drain_seconds, jobs = wait_drained_pg(args.database_url, args.drain_timeout)
                drain_cpu = cpu_seconds(server.pid) - drain_cpu
                stored = stored_ids_pg(args.database_url, source["id"])
            else:
                db = server.data_dir / "sluice.db"
                drain_seconds, jobs = wait_drained(db, args.drain_timeout)
                drain_cpu = cpu_seconds(server.pid) - drain_cpu
                stored = stored_ids(db, source["id"])
            if worker is not None:
                worker.terminate()
                worker.wait(30)
    finally:
        bare.stop()
        if worker is not None and worker.poll() is None:
            worker.kill()
    stored_set = set(stored)
    missing = sorted(set(acked) - stored_set)
    return {
        "cells": results,
        "durability": {
            "acknowledged": len(acked),
            "stored_events": len(stored),
            "missing": len(missing),
            "missing_sample": missing[:20],
            "duplicates": len(stored) - len(stored_set),
            "unacknowledged_stored": len(stored_set - set(acked)),
            "jobs": jobs,
            "drain_seconds_after_load": drain_seconds,
            # The server's CPU (its Node runners with it) while it drained.
            "drain_cpu_seconds": drain_cpu,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per cell")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    parser.add_argument("--drain-timeout", type=float, default=900.0)
    parser.add_argument(
        "--retention",
        type=int,
        default=100_000_000,
        help="SLUICE_EVENT_RETENTION; below the requests sent, the check cannot be exact",
    )
    parser.add_argument(
        "--storage-quota-mb",
        type=int,
        default=1024,
        help="SLUICE_STORAGE_QUOTA_MB; 0 turns the quota (its check and its counter) off",
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data dir")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="SLUICE_X=v for the server (bench/_server.py passes no SLUICE_* of its own "
        "environment), e.g. --env SLUICE_SHED_BACKLOG_SECONDS=0",
    )
    parser.add_argument(
        "--roles",
        choices=["all", "split"],
        default="all",
        help="all: one sluice serve; split: serve --role api plus serve --role worker",
    )
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="with --roles split: the worker process's nice value (10: requests first)",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="run Sluice on a fresh database of this PostgreSQL server (dropped after)",
    )
    args = parser.parse_args()
    args.database_url = None

    env = environment()
    print(
        f"Ingestion: {args.seconds:g} s per cell after {args.warmup:g} s warm-up, "
        f"client {args.client}, roles {args.roles}"
    )
    if args.postgres:
        args.database_url = asyncio.run(create_database(args.postgres))
    try:
        data = measure(args)
    finally:
        if args.database_url:
            asyncio.run(drop_database(args.postgres, args.database_url))
    cells = data["cells"]
    ratios = print_ratio_table(cells, env)
    d = data["durability"]
    backlog, seconds = d["jobs"].pop("backlog", 0), d["drain_seconds_after_load"]
    print()
    print(
        f"Durability: {d['acknowledged']} acknowledged, {d['stored_events']} events stored, "
        f"{d['missing']} missing, {d['duplicates']} duplicated; jobs {d['jobs']}; the queue "
        f"drained {d['drain_seconds_after_load']:.1f} s after the load"
    )
    if seconds > 1:  # the worker alone, no requests to take: what it drains a second
        print(
            f"Drain: {backlog} jobs queued at the load's end, run in {seconds:.1f} s = "
            f"{backlog / seconds:.0f} jobs/s; the server's CPU (with its runners) "
            f"{d['drain_cpu_seconds'] / seconds:.2f} cores, "
            f"{1e6 * d['drain_cpu_seconds'] / max(backlog, 1):.0f} us a job"
        )
    by = {(c["target"], c["concurrency"]): c for c in cells}
    acked_ratios = {
        c: by[("sluice", c)]["acked_rps"] / by[("bare", c)]["rps"] for c in sorted(ratios)
    }
    print(
        "Acknowledged (2xx) a second against the bare app's answers: "
        + ", ".join(
            f"c={c} {by[('sluice', c)]['acked_rps']:.0f}/s = {r:.0%}"
            for c, r in acked_ratios.items()
        )
        + " (the table's req/s counts 503s too)"
    )
    top = max(ratios)
    durable = d["missing"] == 0
    met = ratios[top] >= GOAL_RATIO and durable
    print(
        f"Goal (>= {GOAL_RATIO:.0%} of bare throughput at c={top}, none lost): "
        f"{'MET' if met else 'MISSED'} ({ratios[top]:.0%}, "
        f"{'none' if durable else d['missing']} lost)"
    )
    path = write_results(
        "ingest",
        {
            "args": vars(args),
            "environment": env,
            **data,
            "ratio_by_concurrency": ratios,
            "acked_ratio_by_concurrency": acked_ratios,
            "goal_ratio": GOAL_RATIO,
            "goal_met": met,
        },
    )
    print(f"\nResults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
