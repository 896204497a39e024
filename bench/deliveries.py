"""Webhook deliveries: how many a second one Sluice process POSTs to a local receiver.

What it measures: a real ``sluice serve`` (own temp data dir, SQLite, default settings plus any
``--env SLUICE_X=v``; ``SLUICE_EGRESS_ALLOW=127.0.0.1:*`` so it may reach the receiver) with one
account, one webhook whose URL is a receiver on 127.0.0.1 in a process of its own
(``_webhook_target.py``: answers 200 at once), and a source subscribed to it that emits
``--per-run`` events a run. Each round runs the source by hand ``--runs`` times (so
``per-run * runs`` deliveries are stored, each with its event), then waits until the receiver
got them all. A round's figure is deliveries / (last arrival - first arrival), as the receiver
saw them: the process also ran the source and stored the events meanwhile, as it would. Three
rounds; the worst is the figure. Beside it, deliveries per second of the server process's own
CPU time (user + system, from /proc) over the round: on a shared, loaded machine the wall
figure says how much CPU the process got as much as how fast it is. Every delivery carries
its ``Idempotency-Key``: the receiver counts distinct keys, so doubles show.

Baselines, measured in the same run against the same receiver from this script's process
(one process, ``--concurrency`` requests in flight, as one webhook's slots):

  bare httpx      one shared ``httpx.AsyncClient`` POSTing the same body in a loop: what one
                  Python process can push at all (per wall second and per CPU second)
  bare aiohttp    the same with one ``aiohttp.ClientSession`` (the deliveries' client since
                  it measured ~5x less CPU a request than httpx: ``engine/outbound/posts.py``)
  client each     a new egress-checked client per request, as each delivery made before
                  (``http_clients.client`` then closed): the old path, on fewer requests

Goal (issue 30): ≥ 500 deliveries a second per process.

Run:  .venv/bin/python bench/deliveries.py [--per-run 1000] [--runs 4] [--concurrency 8]
Results: printed table, and bench/results/deliveries.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from _server import Server, api, environment, free_port, table, write_results

from sluice.domain import egress
from sluice.engine.outbound import http_clients

BURST = """
export default { name: "Burst", version: "1",
  async run(event) {
    for (let n = 0; n < event.count; n++) {
      this.$emit({ n, pad: "x".repeat(200) }, { summary: `${n}` });
    }
  } };
"""
BODY = json.dumps({"n": 1, "pad": "x" * 200}).encode()


def stats(port: int) -> dict[str, float]:
    out: dict[str, float] = httpx.get(f"http://127.0.0.1:{port}/stats").json()
    return out


def reset(port: int) -> None:
    httpx.post(f"http://127.0.0.1:{port}/reset")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_of(
    server: Server, client: httpx.Client, source_id: str, port: int, args: Any
) -> dict[str, Any]:
    reset(port)
    cpu_before = cpu_seconds(server.pid)
    expected = args.per_run * args.runs
    for _ in range(args.runs):
        api(client, "POST", f"/v1/sources/{source_id}/run", {"event": {"count": args.per_run}})
    deadline = time.monotonic() + args.timeout
    while (seen := stats(port))["count"] < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"only {seen['count']} of {expected} delivered in {args.timeout} s:\n"
                + server.log_tail()
            )
        time.sleep(0.05)
    seconds = seen["last"] - seen["first"]
    cpu = cpu_seconds(server.pid) - cpu_before
    return {
        "server_cpu_seconds": round(cpu, 3),
        "per_cpu_second": round(seen["count"] / cpu, 1),
        "connections": int(seen["connections"]),
        "deliveries": int(seen["count"]),
        "distinct_keys": int(seen["keys"]),
        "seconds": round(seconds, 3),
        "per_second": round(seen["count"] / seconds, 1),
    }


async def bare_httpx(url: str, total: int, concurrency: int) -> tuple[float, float]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency)) as client:
        left = iter(range(total))

        async def lane() -> None:
            for _ in left:
                (
                    await client.post(
                        url, content=BODY, headers={"Content-Type": "application/json"}
                    )
                ).raise_for_status()

        started, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        return total / wall, total / cpu


async def bare_aiohttp(url: str, total: int, concurrency: int) -> tuple[float, float]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        left = iter(range(total))

        async def lane() -> None:
            for _ in left:
                async with session.post(
                    url, data=BODY, headers={"Content-Type": "application/json"}
                ) as response:
                    response.raise_for_status()
                    await response.read()

        started, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
        return total / wall, total / cpu


async def client_each(url: str, total: int, concurrency: int) -> tuple[float, float]:
    policy = egress.EgressPolicy.parse("127.0.0.1:*")
    left = iter(range(total))

    async def lane() -> None:
        for _ in left:
            async with http_clients.client(policy, follow_redirects=False) as client:
                (
                    await client.post(
                        url, content=BODY, headers={"Content-Type": "application/json"}
                    )
                ).raise_for_status()

    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    return total / wall, total / cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--per-run", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--old-requests", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--env", action="append", default=[], help="SLUICE_X=v for the server")
    args = parser.parse_args()
    env = {
        "SLUICE_EGRESS_ALLOW": "127.0.0.1:*",
        "SLUICE_MAX_EMITS_PER_INVOCATION": str(max(1000, args.per_run)),
        "SLUICE_EVENT_RETENTION": str(args.per_run * args.runs * args.rounds),
    }
    env.update(item.split("=", 1) for item in args.env)
    info = environment()
    port = free_port()
    target = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "_webhook_target.py"), str(port)],
        stdout=subprocess.PIPE,
    )
    try:
        assert target.stdout is not None and target.stdout.readline().strip() == b"ready"
        url = f"http://127.0.0.1:{port}/hook"
        rounds: list[dict[str, Any]] = []
        with Server(env=env) as server:
            account = server.create_account("bench")
            with server.client(account) as client:
                hook = api(client, "POST", f"/v1/webhooks?url={url}")
                source = api(client, "POST", "/v1/sources", {"component_code": BURST})
                api(
                    client,
                    "POST",
                    f"/v1/subscriptions?emitter_id={source['id']}&listener_id={hook['id']}",
                )
                for _ in range(args.rounds):
                    rounds.append(round_of(server, client, source["id"], port, args))
                    print(f"round {len(rounds)}: {rounds[-1]}", flush=True)
        reset(port)
        bare = asyncio.run(bare_httpx(url, args.per_run * args.runs, args.concurrency))
        lean = asyncio.run(bare_aiohttp(url, args.per_run * args.runs, args.concurrency))
        old = asyncio.run(client_each(url, args.old_requests, args.concurrency))
    finally:
        target.terminate()
        target.wait()
    worst = min(r["per_second"] for r in rounds)
    worst_cpu = min(r["per_cpu_second"] for r in rounds)
    rows = [
        [f"sluice round {i + 1}", r["deliveries"], r["distinct_keys"], r["connections"],
         r["seconds"], r["per_second"], r["per_cpu_second"]]
        for i, r in enumerate(rounds)
    ]  # fmt: skip
    rows.append(["bare httpx", args.per_run * args.runs, "", "", "", round(bare[0], 1),
                 round(bare[1], 1)])  # fmt: skip
    rows.append(["bare aiohttp", args.per_run * args.runs, "", "", "", round(lean[0], 1),
                 round(lean[1], 1)])  # fmt: skip
    rows.append(["client each (old path)", args.old_requests, "", "", "", round(old[0], 1),
                 round(old[1], 1)])  # fmt: skip
    headers = ["", "deliveries", "keys", "connections", "seconds", "per second", "per CPU s"]
    print(table(headers, rows))
    print(
        f"worst of {len(rounds)}: {worst}/s, {worst_cpu} per CPU second (goal >= 500/s); "
        f"bare httpx {bare[0]:.0f}/s, bare aiohttp {lean[0]:.0f}/s; "
        f"{worst / old[0]:.1f}x the old path; "
        f"load at start {info['loadavg_at_start']}, at the end {os.getloadavg()[0]:.2f}"
    )
    write_results(
        "deliveries",
        {"environment": info, "rounds": rounds, "worst_per_second": worst,
         "worst_per_cpu_second": worst_cpu, "bare_httpx": bare, "bare_aiohttp": lean,
         "client_each": old, "args": vars(args)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
