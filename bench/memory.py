"""Memory of 1,000 deployed sources, each run once.

What it measures: a real ``sluice serve`` (own temp data dir, default settings unless
``--max-workers``/``--idle-seconds`` are given) with A accounts (so A Node runner
processes). Each account saves the trivial source once; then S sources (default 1,000) are
deployed from those component ids, spread round robin over the accounts, and each is run once
(``C`` requests in flight, default 8). RSS is VmRSS from ``/proc/<pid>/status``, summed over
the server process and all its descendants (found through the ppid of every /proc entry);
a background thread samples the total every 0.5 s for the peak. Reported per scenario: total
RSS after the runs, the server alone, the Node runners (count, sum, each), the peak, the time
to deploy and to run everything, and the verdict. ``--settle`` seconds later the RSS is read
once more (idle workers are stopped only after SLUICE_WORKER_IDLE_SECONDS, 300 s by default).

Goal (from the issue): 1,000 deployed sources, each run once: RSS of all Sluice processes
together stays under 2 GB (idle deployments must not each hold a worker forever).

Run:  .venv/bin/python bench/memory.py [--sources 1000] [--accounts 10] [--concurrency 8]
      .venv/bin/python bench/memory.py --accounts 1
      .venv/bin/python bench/memory.py --accounts 10,1     (both scenarios, one after the other)
Results: printed tables, and bench/results/memory.json (one entry per scenario).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from _server import (
    TRIVIAL_SOURCE,
    PeakSampler,
    Server,
    TreeMemory,
    api,
    check_run,
    environment,
    mib,
    table,
    tree_memory,
    write_results,
)

GOAL_BYTES = 2 * 1024**3


def memory_figures(mem: TreeMemory) -> dict[str, Any]:
    return {
        "total_bytes": mem.total,
        "server_bytes": mem.server_rss,
        "runner_count": len(mem.runners),
        "runner_bytes": mem.runner_rss,
        "runners": [{"pid": p, "rss_bytes": r, "threads": t} for p, r, t in mem.runners],
        "others": [{"pid": p, "rss_bytes": r, "cmd": c} for p, r, c in mem.others],
    }


def scenario(args: argparse.Namespace, accounts_n: int) -> dict[str, Any]:
    env: dict[str, str] = {}
    if args.max_workers is not None:
        env["SLUICE_MAX_WORKERS_PER_RUNNER"] = str(args.max_workers)
    if args.idle_seconds is not None:
        env["SLUICE_WORKER_IDLE_SECONDS"] = str(args.idle_seconds)
    with Server(env=env, keep=args.keep) as server:
        idle = tree_memory(server.pid)
        accounts = [server.create_account(f"bench{i}") for i in range(accounts_n)]
        clients = [server.client(a) for a in accounts]
        try:
            with PeakSampler(server.pid, interval=0.5) as sampler:
                component_ids = [
                    api(c, "POST", "/v1/components", {"component_code": TRIVIAL_SOURCE})["id"]
                    for c in clients
                ]

                def deploy(i: int) -> tuple[httpx.Client, str]:
                    client = clients[i % accounts_n]
                    data = api(
                        client,
                        "POST",
                        "/v1/sources",
                        {"component_id": component_ids[i % accounts_n], "name": f"s{i}"},
                    )
                    return client, data["id"]

                def run(item: tuple[httpx.Client, str]) -> None:
                    client, source_id = item
                    data = api(client, "POST", f"/v1/sources/{source_id}/run", {"event": {}})
                    check_run(data, 1)

                with ThreadPoolExecutor(args.concurrency) as executor:
                    t0 = time.perf_counter()
                    deployed = list(executor.map(deploy, range(args.sources)))
                    deploy_s = time.perf_counter() - t0
                    after_deploy = tree_memory(server.pid)
                    t0 = time.perf_counter()
                    list(executor.map(run, deployed))
                    run_s = time.perf_counter() - t0
            after = tree_memory(server.pid)
            settled = None
            if args.settle > 0:
                time.sleep(args.settle)
                settled = tree_memory(server.pid)
        finally:
            for c in clients:
                c.close()
    return {
        "accounts": accounts_n,
        "sources": args.sources,
        "concurrency": args.concurrency,
        "settings": env,
        "deploy_seconds": deploy_s,
        "run_seconds": run_s,
        "idle_server": memory_figures(idle),
        "after_deploy": memory_figures(after_deploy),
        "after_runs": memory_figures(after),
        "settled": memory_figures(settled) if settled else None,
        "settle_seconds": args.settle,
        "peak_total_bytes": sampler.peak,
        "peak_runner_count": sampler.peak_runners,
        "samples": sampler.samples,
        "under_goal": after.total < GOAL_BYTES and sampler.peak < GOAL_BYTES,
    }


def report(result: dict[str, Any]) -> None:
    after = result["after_runs"]
    print()
    print(
        f"{result['sources']} trivial sources over {result['accounts']} account(s), "
        f"each run once ({result['concurrency']} in flight)"
    )
    rows: list[list[Any]] = [
        ["deploy all (s)", result["deploy_seconds"]],
        ["run all once (s)", result["run_seconds"]],
        [
            "deploys / runs per second",
            f"{result['sources'] / result['deploy_seconds']:.1f} / "
            f"{result['sources'] / result['run_seconds']:.1f}",
        ],
        ["RSS before anything (MiB)", mib(result["idle_server"]["total_bytes"])],
        ["RSS after deploys (MiB)", mib(result["after_deploy"]["total_bytes"])],
        ["RSS total after runs (MiB)", mib(after["total_bytes"])],
        ["  server process (MiB)", mib(after["server_bytes"])],
        [
            f"  Node runners: {after['runner_count']} (MiB)",
            mib(after["runner_bytes"]),
        ],
        ["  other descendants (MiB)", mib(sum(o["rss_bytes"] for o in after["others"]))],
        ["peak total RSS, sampled 0.5 s (MiB)", mib(result["peak_total_bytes"])],
    ]
    if result["settled"]:
        rows.append(
            [
                f"RSS total {result['settle_seconds']:g} s later (MiB)",
                mib(result["settled"]["total_bytes"]),
            ]
        )
    print(table(["measure", "value"], rows))
    runners = after["runners"]
    if runners:
        print()
        print(
            table(
                ["runner pid", "RSS MiB", "threads"],
                [[r["pid"], mib(r["rss_bytes"]), r["threads"]] for r in runners],
            )
        )
    worst = max(after["total_bytes"], result["peak_total_bytes"])
    if result["under_goal"]:
        print(f"Goal (< 2 GiB total): MET (worst {mib(worst):.0f} MiB)")
    else:
        print(
            f"Goal (< 2 GiB total): MISSED by {mib(worst - GOAL_BYTES):.0f} MiB "
            f"(worst {mib(worst):.0f} MiB)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=1000, help="deployed sources")
    parser.add_argument(
        "--accounts",
        default="10",
        help="accounts the sources are spread over; a comma list runs several scenarios",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="read the RSS again this many seconds later"
    )
    parser.add_argument(
        "--max-workers", type=int, default=None, help="SLUICE_MAX_WORKERS_PER_RUNNER"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="SLUICE_WORKER_IDLE_SECONDS"
    )
    parser.add_argument("--keep", action="store_true", help="keep the servers' data dirs")
    args = parser.parse_args()
    counts = [int(x) for x in str(args.accounts).split(",") if x.strip()]

    env = environment()
    print(f"(cpus {env['cpus']}, load at start {env['loadavg_at_start']})")
    results = []
    for n in counts:
        result = scenario(args, n)
        report(result)
        results.append(result)

    if len(results) > 1:
        print()
        print(
            table(
                [
                    "accounts",
                    "total MiB",
                    "server MiB",
                    "runners",
                    "runners MiB",
                    "peak MiB",
                    "deploy s",
                    "run s",
                ],
                [
                    [
                        r["accounts"],
                        mib(r["after_runs"]["total_bytes"]),
                        mib(r["after_runs"]["server_bytes"]),
                        r["after_runs"]["runner_count"],
                        mib(r["after_runs"]["runner_bytes"]),
                        mib(r["peak_total_bytes"]),
                        r["deploy_seconds"],
                        r["run_seconds"],
                    ]
                    for r in results
                ],
            )
        )
    path = write_results(
        "memory",
        {
            "args": vars(args),
            "environment": env,
            "goal_bytes": GOAL_BYTES,
            "scenarios": results,
            "goal_met": all(r["under_goal"] for r in results),
        },
    )
    print(f"\nResults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
