"""Fair sharing between accounts: what an attacking account does to another account's figures.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite, the endpoint rate limit
off so the attacker's requests are all accepted) with two accounts. Account B has a webhook
source (an HTTP endpoint whose ``run()`` emits the body). B's figures: the API latency of
``GET /v1/users/me/sources`` (``--api-calls`` calls one after another) and the webhook latency
(``--hooks`` requests one after another: the time from ``POST /e/<id>`` to the emitted event
being listed by ``GET /v1/sources/<id>/event_summaries``). Measured once idle, then again while
account A attacks from three threads, each bounded in count and time:

- ``hang``: ``--hang-requests`` requests, 8 at a time, to A's HTTP source whose ``run()`` never
  resolves (each holds a job slot until its time-out);
- ``flood``: ``--floods`` requests to A's source emitting 100k events in one run;
- ``hog``: ``--hogs`` requests to A's source writing 5 MB to ``this.db``.

(The floods and hogs are sent once before the hanging requests, so that they run, then once more
alongside them.)

Printed: B's p50/p99 of both figures idle and under attack, and the ratios (goal: within 2x),
and what the attack met (its runs' errors: ``EMIT_LIMIT``, ``DB_LIMIT``, ``TIMEOUT``).

Run:  .venv/bin/python bench/fairness.py [--api-calls 200] [--hooks 30] [--hang-requests 60]
      [--floods 5] [--hogs 5]
Results: printed table, and bench/results/fairness.json.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from _server import Server, api, environment, summary, table, write_results

WEBHOOK = (
    'export default { name: "Webhook", version: "0.0.1", props: { http: "$.interface.http" },\n'
    "  async run(event) { this.$emit(event.body); } };\n"
)
HANG = (
    'export default { name: "Hang", version: "0.0.1", props: { http: "$.interface.http" },\n'
    "  async run() { await new Promise(() => {}); } };\n"
)
FLOOD = (
    'export default { name: "Flood", version: "0.0.1", props: { http: "$.interface.http" },\n'
    "  async run() { for (let i = 0; i < 100000; i++) this.$emit({ i }); } };\n"
)
HOG = (
    'export default { name: "Hog", version: "0.0.1",\n'
    '  props: { http: "$.interface.http", db: "$.service.db" },\n'
    '  async run() { this.db.set("big", "x".repeat(5000000)); } };\n'
)

#: No loop of this script runs longer than this, whatever happens.
DEADLINE_S = 120.0


def deploy(client: httpx.Client, code: str) -> tuple[str, str]:
    """(source id, endpoint path)."""
    data = api(client, "POST", "/v1/sources", {"component_code": code})
    return data["id"], "/e/" + data["endpoint_url"].rsplit("/", 1)[1]


def api_latencies(client: httpx.Client, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        response = client.get("/v1/users/me/sources")
        out.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return out


def hook_latencies(
    client: httpx.Client, public: httpx.Client, source_id: str, path: str, hooks: int, base: int
) -> list[float]:
    """Each request, then the event listed: ms. A run not seen within ``DEADLINE_S`` counts as
    that, and ends the series (the whole series is bounded by it too)."""
    out: list[float] = []
    until = time.perf_counter() + DEADLINE_S
    for n in range(base, base + hooks):
        if out and time.perf_counter() > until:
            break
        started = time.perf_counter()
        public.post(path, json={"n": n}).raise_for_status()
        while True:
            page = client.get(
                f"/v1/sources/{source_id}/event_summaries", params={"limit": 1, "expand": "event"}
            ).json()["data"]
            if page and page[0]["event"] == {"n": n}:
                break
            if time.perf_counter() - started > DEADLINE_S:
                print(f"warning: webhook run {n} not seen in {DEADLINE_S} s", file=sys.stderr)
                out.append(DEADLINE_S * 1000)
                return out
            time.sleep(0.005)
        out.append((time.perf_counter() - started) * 1000)
    return out


def attack(
    public: httpx.Client, paths: dict[str, str], args: argparse.Namespace, stop: threading.Event
) -> dict[str, Any]:
    """Three bounded attackers in threads; their request counts."""
    sent = {"hang": 0, "flood": 0, "hog": 0}
    lock = threading.Lock()
    until = time.monotonic() + DEADLINE_S

    def post(kind: str) -> None:
        if stop.is_set() or time.monotonic() > until:
            return
        try:
            public.post(paths[kind], json={}, timeout=30)
            with lock:
                sent[kind] += 1
        except httpx.HTTPError:
            pass  # an attacker's request refused or timed out is part of the attack: not counted

    def series(kind: str, count: int, workers: int) -> Callable[[], None]:
        def run() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda _: post(kind), range(count)))

        return run

    # The floods and hogs first: A's jobs run in order, and the hanging runs would hold its
    # whole share before them.
    series("flood", args.floods, 1)()
    series("hog", args.hogs, 1)()
    threads = [
        threading.Thread(target=series("hang", args.hang_requests, 8)),
        threading.Thread(target=series("flood", args.floods, 1)),
        threading.Thread(target=series("hog", args.hogs, 1)),
    ]
    for thread in threads:
        thread.start()
    return {"threads": threads, "sent": sent}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    env = {"SLUICE_HTTP_RATE_PER_SECOND": "0"}
    with Server(env=env) as server:
        account_a, account_b = server.create_account("a"), server.create_account("b")
        with (
            server.client(account_a) as a,
            server.client(account_b) as b,
            httpx.Client(base_url=server.base_url, timeout=60) as public,
            httpx.Client(
                base_url=server.base_url,
                timeout=60,
                limits=httpx.Limits(max_connections=16, max_keepalive_connections=16),
            ) as attacker,
        ):
            hook_id, hook_path = deploy(b, WEBHOOK)
            ids, paths = {}, {}
            for kind, code in (("hang", HANG), ("flood", FLOOD), ("hog", HOG)):
                ids[kind], paths[kind] = deploy(a, code)
            hook_latencies(b, public, hook_id, hook_path, 3, 0)  # warm B's runner and worker
            idle = {
                "api_ms": summary(api_latencies(b, args.api_calls)),
                "hook_ms": summary(hook_latencies(b, public, hook_id, hook_path, args.hooks, 100)),
            }
            stop = threading.Event()
            running = attack(attacker, paths, args, stop)
            time.sleep(args.ramp)  # let the attack take hold (the bench, not a test)
            attacked = {
                "api_ms": summary(api_latencies(b, args.api_calls)),
                "hook_ms": summary(hook_latencies(b, public, hook_id, hook_path, args.hooks, 1000)),
            }
            stop.set()
            for thread in running["threads"]:
                thread.join(DEADLINE_S)
            # A's runs of the flood and the hog are over (or the deadline passed).
            until = time.monotonic() + DEADLINE_S
            while time.monotonic() < until and any(
                not api(a, "GET", f"/v1/sources/{ids[kind]}/logs") for kind in ("flood", "hog")
            ):
                time.sleep(0.2)
            met = {
                kind: sorted(
                    {
                        code
                        for entry in api(a, "GET", f"/v1/sources/{source_id}/logs")
                        for code in ("EMIT_LIMIT", "DB_LIMIT", "TIMEOUT")
                        if code in entry["msg"]
                    }
                )
                for kind, source_id in ids.items()
            }
    return {"idle": idle, "attack": attacked, "sent": running["sent"], "errors_met": met}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-calls", type=int, default=200)
    parser.add_argument("--hooks", type=int, default=30)
    parser.add_argument("--hang-requests", type=int, default=60)
    parser.add_argument("--floods", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=5)
    parser.add_argument("--ramp", type=float, default=2.0, help="seconds before measuring")
    args = parser.parse_args()
    result = measure(args)
    rows = []
    for figure in ("api_ms", "hook_ms"):
        for p in ("p50", "p99"):
            idle, attacked = result["idle"][figure][p], result["attack"][figure][p]
            rows.append([f"B {figure} {p}", idle, attacked, attacked / idle])
    print(table(["figure", "idle", "under attack", "ratio"], rows))
    print(f"attack requests sent: {result['sent']}; errors in A's logs: {result['errors_met']}")
    write_results("fairness", {"env": environment(), "args": vars(args), **result})


if __name__ == "__main__":
    main()
