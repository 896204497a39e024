"""Manual runs (issue 15, goal 4): ``POST /v1/workflows/{id}/runs`` of a one-step workflow,
one request at a time, p50 under 2 ms.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite, run retention raised so
no run is trimmed), pinned to CPU 0 with its Node runner, and ``wrk`` pinned to CPU 1 sending
the manual run request on one keep-alive connection (c=1) for ``--seconds``. Each answer is a
whole run: authentication, the run in Node, its commit, the rendered run. ``wrk`` measures the
server, not a Python client around it: an ``httpx`` client adds about 1 ms of its own per
request on this machine (shown beside, as "httpx client", over ``--httpx-n`` requests).

Each round starts a fresh server; ``--rounds`` rounds (default 3), the worst p50 is the one
reported. Nothing lost: every request answered 200 must be a stored run (the workflow's run
count afterwards is the warm-up runs plus wrk's 2xx answers, or one more: wrk stops with at
most one request in flight, which is run and stored but not counted), and no non-2xx.

Run:  .venv/bin/python bench/manual_runs.py [--seconds 5] [--rounds 3]
Needs wrk (apt-get install wrk) and taskset. Results: printed, and bench/results/manual_runs.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._server import Server, api, environment, percentile, write_results, wrk_post

STEP = "export default defineComponent({ async run({ steps }) { return steps.trigger.event.n } })"
WARMUP = 200


def one_round(seconds: float, httpx_n: int) -> dict[str, Any]:
    with Server(env={"SLUICE_RUN_RETENTION": "10000000"}) as server:
        os.sched_setaffinity(server.pid, {0})
        account = server.create_account("bench")
        with server.client(account) as client:
            workflow = api(
                client,
                "POST",
                "/v1/workflows",
                {"name": "one", "trigger": {"type": "manual"},
                 "steps": [{"name": "s0", "code": STEP}]},
            )  # fmt: skip
            path = f"/v1/workflows/{workflow['id']}/runs"
            for i in range(WARMUP):
                run = api(client, "POST", path, {"event": {"n": i}})
                if run["status"] != "success" or run["steps"][0]["return_value"] != i:
                    raise RuntimeError(f"unexpected run: {str(run)[:500]}")
            # The runner was started by the first run: pin it (and any thread) too.
            for pid in _tree(server.pid):
                os.sched_setaffinity(pid, {0})
            measured = wrk_post(
                server.base_url + path,
                '{"event": {"n": 1}}',
                seconds=seconds,
                headers={"Authorization": f"Bearer {account.api_key}"},
            )
            httpx_ms = []
            for i in range(httpx_n):
                t0 = time.perf_counter()
                response = client.post(path, json={"event": {"n": i}})
                httpx_ms.append((time.perf_counter() - t0) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"run → {response.status_code}: {response.text[:300]}")
            stored = client.get(path, params={"limit": 1}).json()["page_info"]["total_count"]
    answered = WARMUP + measured["requests"] - measured["non_2xx"] + httpx_n
    return {
        **measured,
        "httpx_p50_ms": percentile(httpx_ms, 50) if httpx_ms else None,
        "stored": stored,
        "answered_200": answered,
        # wrk stops with at most one request in flight: run and stored, never counted.
        "lost": max(0, answered - stored) + (1 if stored - answered > 1 else 0),
    }


def _tree(pid: int) -> list[int]:
    out = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            out += _tree(int(child))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--httpx-n", type=int, default=300)
    args = parser.parse_args()
    env = environment()
    rounds = []
    for r in range(args.rounds):
        result = one_round(args.seconds, args.httpx_n)
        rounds.append(result)
        print(
            f"round {r + 1}: wrk c=1 p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms, "
            f"{result['requests']} requests ({result['non_2xx']} non-2xx); httpx client p50 "
            f"{result['httpx_p50_ms']:.3f} ms; answered 200 {result['answered_200']}, stored "
            f"{result['stored']}",
            flush=True,
        )
    worst = max(rounds, key=lambda x: x["p50_ms"])
    lost = sum(x["lost"] for x in rounds) + sum(x["non_2xx"] for x in rounds)
    met = worst["p50_ms"] < 2.0 and lost == 0
    print(
        f"\nworst of {args.rounds}: p50 {worst['p50_ms']:.3f} ms (load at start "
        f"{env.get('loadavg_at_start')}); every answered run stored: "
        f"{'yes' if lost == 0 else 'NO'}\n"
        f"Goal (manual run p50 < 2 ms, c=1, nothing lost): {'MET' if met else 'NOT MET'}"
    )
    path = write_results("manual_runs", {"env": env, "rounds": rounds, "met": met})
    print(f"Results written to {path}")
    return 0 if lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
