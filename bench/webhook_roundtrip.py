"""Round trip through an HTTP-triggered workflow that answers with ``$.respond``.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite, the endpoint rate limit
off, run retention raised so no run is trimmed) with one workflow: an HTTP trigger with
``custom_response: true`` and one code step ``await $.respond({status: 200, body: {ok:
true}})``. The client's request waits for the run (no ``immediate``), so each answer is one
whole run: the request stored as a job, the job run in a warm Node worker, the run stored, the
answer sent. Against it, the bare Starlette app of bench/ingest.py (bench/_bare_app.py, same
uvicorn settings) answering 200 on the same machine. For each concurrency (1, 16, 64) the two
are driven in turn for ``--seconds`` after ``--warmup`` seconds, C keep-alive connections each
sending ``POST {"i": <unique n>}`` and waiting for the answer (the clients of bench/ingest.py).
Figures: requests/s, p50/p99 latency (client wall time), the ratio Sluice/bare of requests/s,
and the CPU of the client and of each server process tree over the window.

The client: ``--client httpx`` (the default) is one httpx.AsyncClient with C connections;
``--client raw`` is bench/ingest.py's minimal asyncio HTTP/1.1 client (~20 µs of client CPU a
request). On a 2-core machine httpx costs enough client CPU to cap the bare app's figure, so
compare the ratio of both when the client's CPU column reads near 1.

Durability: every request Sluice answered 2xx must be a stored run. After the load, the
workflow's ``GET /v1/workflows/{id}/runs`` ``page_info.total_count`` is compared with the
requests sent, and the runs' events are read from the SQLite file: every acknowledged ``i``
once, none missing, none doubled, every body ``{"ok": true}``.

Run:  .venv/bin/python bench/webhook_roundtrip.py [--seconds 5] [--warmup 1]
      [--concurrency 1,16,64] [--client httpx|raw] [--quick]
Results: printed table, and bench/results/webhook_roundtrip.json (webhook_roundtrip_raw.json with
``--client raw``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _server import Server, api, environment, print_ratio_table, write_results
from ingest import Bare, Counter, measure_cell

RESPOND = (
    "export default defineComponent({ async run({ steps, $ }) "
    "{ await $.respond({ status: 200, body: { ok: true } }) } })\n"
)


def stored_runs(db: Path, workflow_id: str) -> tuple[list[int], dict[str, int], int]:
    """The ``i`` of each stored run's request body, runs by status, and runs whose answer was
    not ``{"ok": true}``."""
    ids: list[int] = []
    statuses: dict[str, int] = {}
    wrong = 0
    with sqlite3.connect(db, timeout=30) as conn:
        rows = conn.execute(
            "SELECT status, event, response FROM runs WHERE workflow_id = ?", (workflow_id,)
        )
        for status, event, response in rows:
            statuses[status] = statuses.get(status, 0) + 1
            body = (json.loads(event) or {}).get("body")
            if isinstance(body, dict) and "i" in body:
                ids.append(int(body["i"]))
            answer = json.loads(response) if response else None
            if not answer or answer.get("body") != {"ok": True}:
                wrong += 1
    return ids, statuses, wrong


def total_count(client: httpx.Client, workflow_id: str) -> int:
    page = client.get(f"/v1/workflows/{workflow_id}/runs", params={"limit": 1}).json()
    return int(page["page_info"]["total_count"])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    env = {"SLUICE_HTTP_RATE_PER_SECOND": "0", "SLUICE_RUN_RETENTION": str(args.retention)}
    counter = Counter()
    acked: list[int] = []
    sent = 0
    results: list[dict[str, Any]] = []
    bare = Bare()
    try:
        with Server(env=env, keep=args.keep) as server:
            account = server.create_account("bench")
            with server.client(account) as client:
                workflow = api(
                    client,
                    "POST",
                    "/v1/workflows",
                    {
                        "name": "webhook",
                        "trigger": {"type": "http", "custom_response": True},
                        "steps": [{"name": "respond", "code": RESPOND}],
                    },
                )
                path = "/e/" + workflow["endpoint_url"].rsplit("/", 1)[1]
                # The answer must be the step's, not the default one.
                probe = client.post(path, json={"i": 0})
                if probe.status_code != 200 or probe.json() != {"ok": True}:
                    raise RuntimeError(f"probe → {probe.status_code}: {probe.text[:500]}")
                acked.append(0)
                sent += 1
                targets = [
                    ("bare", bare.port, "/", bare.proc.pid),
                    ("sluice", server.port, path, server.pid),
                ]
                for concurrency in concurrencies:
                    for name, port, target_path, pid in targets:
                        warm, cell, row = measure_cell(
                            args, name, port, target_path, pid, concurrency, counter
                        )
                        if name == "sluice":
                            acked += warm.acked + cell.acked
                            sent += len(warm.latencies_ms) + len(cell.latencies_ms)
                            sent += warm.errors + cell.errors
                        results.append(row)
                # Answers wait for the run to be stored, so the count should be there at once;
                # allow a moment for anything still running (a request cut off by the client).
                started = time.perf_counter()
                count = total_count(client, workflow["id"])
                while count < len(acked) and time.perf_counter() - started < args.settle:
                    time.sleep(0.2)
                    count = total_count(client, workflow["id"])
                settled = time.perf_counter() - started
            ids, statuses, wrong = stored_runs(server.data_dir / "sluice.db", workflow["id"])
    finally:
        bare.stop()
    id_set = set(ids)
    missing = sorted(set(acked) - id_set)
    return {
        "cells": results,
        "durability": {
            "requests_sent": sent,
            "acknowledged": len(acked),
            "total_count": count,
            "stored_runs": len(ids),
            "runs_by_status": statuses,
            "wrong_response": wrong,
            "missing": len(missing),
            "missing_sample": missing[:20],
            "duplicates": len(ids) - len(id_set),
            "unacknowledged_stored": len(id_set - set(acked)),
            "settle_seconds": settled,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per cell")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    parser.add_argument("--client", choices=["httpx", "raw"], default="httpx")
    parser.add_argument("--settle", type=float, default=30.0, help="wait for runs after load")
    parser.add_argument("--retention", type=int, default=1_000_000, help="SLUICE_RUN_RETENTION")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 s cells, no warm-up")
    parser.add_argument("--keep", action="store_true", help="keep the server's data dir")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.warmup = 1.0, 0.2

    env = environment()
    print(
        f"Webhook round trip: {args.seconds:g} s per cell after {args.warmup:g} s warm-up, "
        f"client {args.client}"
    )
    data = measure(args)
    cells = data["cells"]
    ratios = print_ratio_table(cells, env)
    by = {(c["target"], c["concurrency"]): c for c in cells}
    d = data["durability"]
    print()
    print(
        f"Runs: {d['requests_sent']} requests sent to Sluice, {d['acknowledged']} answered 2xx, "
        f"total_count {d['total_count']}, {d['stored_runs']} runs in the file "
        f"{d['runs_by_status']}; {d['missing']} acknowledged without a run, "
        f"{d['duplicates']} doubled, {d['wrong_response']} with another response"
    )
    durable = d["missing"] == 0 and d["duplicates"] == 0 and d["total_count"] >= d["acknowledged"]
    top = max(ratios)
    print(
        f"Verdict: every answered request stored as a run: {'YES' if durable else 'NO'}; "
        f"at c={top} Sluice does {by[('sluice', top)]['rps']:.0f} req/s, "
        f"{ratios[top]:.0%} of the bare app (p50 {by[('sluice', top)]['latency_ms']['p50']:.1f} ms)"
    )
    busy = [c["concurrency"] for c in cells if c["target"] == "bare" and c["client_cpu"] >= 0.85]
    if busy:
        print(
            f"Note: the client used most of a core against the bare app at c={busy}: there the "
            "bare figure is the client's limit, not the app's, and the ratio overstates Sluice "
            "(run again with --client raw)"
        )
    name = "webhook_roundtrip" if args.client == "httpx" else f"webhook_roundtrip_{args.client}"
    path = write_results(
        name,
        {
            "args": vars(args),
            "environment": env,
            **data,
            "ratio_by_concurrency": ratios,
            "durable": durable,
        },
    )
    print(f"\nResults written to {path}")
    return 0 if durable else 1


if __name__ == "__main__":
    sys.exit(main())
