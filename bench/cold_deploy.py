"""Cold deploy: save + deploy + first run of a new component whose npm dependency is in the store.

What it measures: a real ``sluice serve`` (own temp data dir, so an empty npm store) and one
account. First, one source importing ``is-odd`` is saved, deployed and run: that installs the
package with npm into ``<data_dir>/npm-store`` (reported apart as "first install"; it needs the
npm registry). Then K times, for a NEW component (same import, a unique comment so its code
hash, directory and worker are new), the client-side wall time of:

  save       POST /v1/components {component_code}   (store hit, tree on disk, inspect in Node)
  deploy     POST /v1/sources {component_id}         (row insert; hooks, if any)
  first run  POST /v1/sources/{id}/run               (a new worker_thread imports the code)

and their total, with p50 and max. The run must answer ok with ``value: true``. With
``--inline`` (on by default) it also times the one-call form, POST /v1/sources
{component_code} + first run, for K more new components.

Goal (from the issue): save + deploy + first run of a component whose npm dependency is
already in the store: under 1 s.

Run:  .venv/bin/python bench/cold_deploy.py [--k 10] [--no-inline]
Results: printed table, and bench/results/cold_deploy.json.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from typing import Any

import httpx
from _server import Server, api, check_run, environment, summary, table, write_results

GOAL_S = 1.0


def dep_source(tag: str) -> str:
    return (
        f"// bench {tag}\n"
        'import isOdd from "is-odd";\n'
        'export default { name: "Dep", version: "1", async run(e) { return isOdd(3); } };\n'
    )


def timed_call(client: httpx.Client, method: str, path: str, body: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    data = api(client, method, path, body)
    return time.perf_counter() - t0, data


def cold_sequence(client: httpx.Client, code: str) -> dict[str, float]:
    """save, deploy, first run of ``code``; seconds per phase."""
    save_s, component = timed_call(client, "POST", "/v1/components", {"component_code": code})
    deploy_s, source = timed_call(
        client, "POST", "/v1/sources", {"component_id": component["id"], "name": "dep"}
    )
    run_s, result = timed_call(client, "POST", f"/v1/sources/{source['id']}/run", {"event": {}})
    check_run(result, True)
    return {
        "save": save_s,
        "deploy": deploy_s,
        "first_run": run_s,
        "total": save_s + deploy_s + run_s,
    }


def inline_sequence(client: httpx.Client, code: str) -> dict[str, float]:
    """POST /v1/sources {component_code} then the first run; seconds per phase."""
    deploy_s, source = timed_call(
        client, "POST", "/v1/sources", {"component_code": code, "name": "dep-inline"}
    )
    run_s, result = timed_call(client, "POST", f"/v1/sources/{source['id']}/run", {"event": {}})
    check_run(result, True)
    return {"save_and_deploy": deploy_s, "first_run": run_s, "total": deploy_s + run_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=10, help="new components timed")
    parser.add_argument(
        "--inline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time POST /v1/sources {component_code} + first run",
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data dir")
    args = parser.parse_args()

    env = environment()
    tag = secrets.token_hex(4)
    with Server(keep=args.keep) as server:
        account = server.create_account("bench")
        with server.client(account, timeout=600.0) as client:
            first = cold_sequence(client, dep_source(f"{tag} first-install"))
            store = server.data_dir / "npm-store"
            entries = sorted(
                p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")
            )
            cold = [cold_sequence(client, dep_source(f"{tag} {i}")) for i in range(args.k)]
            inline = (
                [inline_sequence(client, dep_source(f"{tag} inline {i}")) for i in range(args.k)]
                if args.inline
                else []
            )
            entries_after = sorted(
                p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")
            )

    phases = ("save", "deploy", "first_run", "total")
    stats = {p: summary([c[p] for c in cold]) for p in phases}
    inline_stats = (
        {p: summary([c[p] for c in inline]) for p in ("save_and_deploy", "first_run", "total")}
        if inline
        else {}
    )
    met = stats["total"]["p50"] < GOAL_S and stats["total"]["max"] < GOAL_S

    ms = 1000.0
    print()
    print(f"Cold deploy of a component whose dependency (is-odd) is in the store: K={args.k}")
    print(f"(cpus {env['cpus']}, load at start {env['loadavg_at_start']}; times in ms)")
    print()
    print(
        table(
            ["", "save", "deploy", "first run", "total"],
            [["first install (npm)", *(first[p] * ms for p in phases)]]
            + [
                [f"new component #{i + 1}", *(c[p] * ms for p in phases)]
                for i, c in enumerate(cold)
            ]
            + [
                ["p50", *(stats[p]["p50"] * ms for p in phases)],
                ["max", *(stats[p]["max"] * ms for p in phases)],
            ],
        )
    )
    if inline:
        print()
        print("One call: POST /v1/sources {component_code} (save + deploy), then first run")
        print(
            table(
                ["", "save+deploy", "first run", "total"],
                [
                    [label, *(inline_stats[p][key] * ms for p in inline_stats)]
                    for label, key in (("p50", "p50"), ("max", "max"))
                ],
            )
        )
    print()
    print(
        f"npm store entries: {len(entries)} after the first install, "
        f"{len(entries_after)} at the end"
    )
    total_p50, total_max = stats["total"]["p50"], stats["total"]["max"]
    verdict = "MET" if met else f"MISSED (p50 {total_p50:.3f} s, max {total_max:.3f} s)"
    print(f"Cold deploy total: p50 {total_p50 * ms:.1f} ms, max {total_max * ms:.1f} ms")
    print(f"Goal (< {GOAL_S:g} s, p50 and max): {verdict}")

    path = write_results(
        "cold_deploy",
        {
            "args": vars(args),
            "environment": env,
            "first_install_s": first,
            "cold_s": cold,
            "cold_summary_s": stats,
            "inline_s": inline,
            "inline_summary_s": inline_stats,
            "npm_store_entries": {"after_first": len(entries), "at_end": len(entries_after)},
            "goal_s": GOAL_S,
            "goal_met": met,
        },
    )
    print(f"\nResults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
