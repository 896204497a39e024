"""Warm invocation overhead of a source run by hand through the REST API.

What it measures: a real ``sluice serve`` (own temp data dir) with one account and one deployed
trivial source (``async run(event) { return 1; }``). After a warm-up, N sequential
``POST /v1/sources/{id}/run`` calls are interleaved one for one with N ``GET /v1/users/me``
calls (authenticated, no invocation) on the same keep-alive connection, so machine noise hits
both equally. Latency is client-side wall time per request. The figure is the difference of
the p50s (run minus bare call) and their ratio; p90/p99 are shown too.

Goal (from the issue): the invocation adds under 1 ms at p50.

Also (unless ``--direct-n 0``), without the server: the Python <-> Node round trip alone,
through ``sluice.runtime.pool.RunnerPool`` in this process, as (a) a ``stats`` request
(answered by the runner's main thread) and (b) an ``invoke`` of the same trivial component
in its warm worker_thread. That splits the HTTP overhead into "Node round trip" and
"everything else" (auth, DB reads and the persist transaction, JSON, FastAPI).

Run:  .venv/bin/python bench/invoke_overhead.py [--n 2000] [--warmup 200] [--direct-n 2000]
Results: printed table, and bench/results/invoke_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _server import (
    TRIVIAL_SOURCE,
    Server,
    api,
    check_run,
    environment,
    summary,
    table,
    write_results,
)

GOAL_MS = 1.0


def measure_http(n: int, warmup: int, keep: bool) -> dict[str, Any]:
    with Server(keep=keep) as server:
        account = server.create_account("bench")
        with server.client(account) as client:
            source = api(
                client,
                "POST",
                "/v1/sources",
                {"component_code": TRIVIAL_SOURCE, "name": "trivial"},
            )
            run_path = f"/v1/sources/{source['id']}/run"
            body = {"event": {"n": 0}}

            def run_once() -> tuple[float, float]:
                t0 = time.perf_counter()
                response = client.post(run_path, json=body)
                elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"run → {response.status_code}: {response.text[:500]}")
                data = response.json()["data"]
                check_run(data, 1)
                return elapsed, float(data.get("duration_ms") or 0.0)

            def me_once() -> float:
                t0 = time.perf_counter()
                response = client.get("/v1/users/me")
                elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"me → {response.status_code}: {response.text[:500]}")
                return elapsed

            for _ in range(warmup):
                run_once()
                me_once()

            runs: list[float] = []
            node_ms: list[float] = []
            bare: list[float] = []
            started = time.perf_counter()
            for i in range(n):
                # Alternate which goes first, so neither always follows the other.
                if i % 2 == 0:
                    r, d = run_once()
                    b = me_once()
                else:
                    b = me_once()
                    r, d = run_once()
                runs.append(r)
                node_ms.append(d)
                bare.append(b)
            wall = time.perf_counter() - started
        return {
            "run_ms": summary(runs),
            "bare_ms": summary(bare),
            "node_duration_ms": summary(node_ms),
            "wall_seconds": wall,
            "server_startup_seconds": server.startup_seconds,
        }


async def _measure_direct(n: int, warmup: int) -> dict[str, Any]:
    from sluice.runtime.pool import Invocation, PoolConfig, RunnerPool

    with tempfile.TemporaryDirectory(prefix="sluice-bench-direct-") as tmp:
        entry = Path(tmp) / "component.mjs"
        entry.write_text(TRIVIAL_SOURCE)
        async with RunnerPool(PoolConfig()) as pool:
            inv = Invocation(
                owner_id="bench",
                worker_key="dc_bench:hash",
                entry=str(entry),
                call={
                    "kind": "run",
                    "event": {"n": 0},
                    "props": {},
                    "db": {},
                    "context": {"id": "x", "deployment_id": "dc_bench", "owner_id": "bench"},
                },
                timeout_ms=300_000,
                memory_mb=256,
            )
            invokes: list[float] = []
            stats: list[float] = []

            async def invoke_once() -> float:
                t0 = time.perf_counter()
                result = await pool.invoke(inv)
                elapsed = (time.perf_counter() - t0) * 1000
                if not result.ok or result.value != 1:
                    raise RuntimeError(f"direct invoke failed: {result.error}")
                return elapsed

            async def stats_once() -> float:
                t0 = time.perf_counter()
                await pool.stats()
                return (time.perf_counter() - t0) * 1000

            for _ in range(warmup):
                await invoke_once()
                await stats_once()
            for i in range(n):
                if i % 2 == 0:
                    invokes.append(await invoke_once())
                    stats.append(await stats_once())
                else:
                    stats.append(await stats_once())
                    invokes.append(await invoke_once())
    return {"invoke_ms": summary(invokes), "stats_ms": summary(stats)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="measured pairs (run + bare call)")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured pairs first")
    parser.add_argument(
        "--direct-n", type=int, default=2000, help="direct RunnerPool calls; 0 to skip"
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data dir")
    args = parser.parse_args()

    env = environment()
    http = measure_http(args.n, args.warmup, args.keep)
    direct = (
        asyncio.run(_measure_direct(args.direct_n, min(args.warmup, args.direct_n)))
        if args.direct_n > 0
        else None
    )

    run, bare = http["run_ms"], http["bare_ms"]
    overhead_p50 = run["p50"] - bare["p50"]
    ratio_p50 = run["p50"] / bare["p50"]
    met = overhead_p50 < GOAL_MS

    rows: list[list[Any]] = [
        ["POST /run (trivial source)", *(run[k] for k in ("p50", "p90", "p99", "mean", "max"))],
        ["GET /v1/users/me (bare)", *(bare[k] for k in ("p50", "p90", "p99", "mean", "max"))],
        [
            "run - bare",
            *(run[k] - bare[k] for k in ("p50", "p90", "p99", "mean")),
            "",
        ],
        [
            "run / bare",
            *(run[k] / bare[k] for k in ("p50", "p90", "p99", "mean")),
            "",
        ],
        [
            "node duration_ms (in runner)",
            *(http["node_duration_ms"][k] for k in ("p50", "p90", "p99", "mean", "max")),
        ],
    ]
    if direct is not None:
        for label, key in (
            ("direct pool.invoke (no server)", "invoke_ms"),
            ("direct runner stats (no worker)", "stats_ms"),
        ):
            s = direct[key]
            rows.append([label, *(s[k] for k in ("p50", "p90", "p99", "mean", "max"))])

    print()
    print(f"Warm invocation overhead: {args.n} interleaved pairs after {args.warmup} warm-up pairs")
    print(f"(cpus {env['cpus']}, load at start {env['loadavg_at_start']}; times in ms)")
    print()
    print(table(["", "p50", "p90", "p99", "mean", "max"], rows))
    print()
    print(f"Overhead of the invocation at p50: {overhead_p50:.3f} ms (ratio {ratio_p50:.2f}x)")
    if met:
        print(f"Goal (< {GOAL_MS:g} ms at p50): MET")
    else:
        print(
            f"Goal (< {GOAL_MS:g} ms at p50): MISSED by {overhead_p50 - GOAL_MS:.3f} ms "
            f"({overhead_p50 / GOAL_MS:.2f}x the budget)"
        )
    if direct is not None:
        rest = overhead_p50 - direct["invoke_ms"]["p50"]
        print(
            f"Of which the Python<->Node round trip (direct p50) is "
            f"{direct['invoke_ms']['p50']:.3f} ms; the rest of the server path ≈ {rest:.3f} ms"
        )

    path = write_results(
        "invoke_overhead",
        {
            "args": vars(args),
            "environment": env,
            "http": http,
            "direct": direct,
            "overhead_p50_ms": overhead_p50,
            "ratio_p50": ratio_p50,
            "goal_ms": GOAL_MS,
            "goal_met": met,
        },
    )
    print(f"\nResults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
