"""What the runner sandbox costs: the same measurements with the sandbox on and off, in one run.

What it measures, through ``sluice.runtime.pool.RunnerPool`` in this process (no HTTP), for
``SandboxConfig(enabled=True)`` (bubblewrap jail, cgroups as root) and without a sandbox,
alternating the two so machine noise hits both:

  runner start a new account's runner (and jail) started and answering a ``stats`` request
  cold start   a new account's first invocation of a trivial source: runner (and jail) start,
               worker start, import, run; ``--cold`` times per mode
  warm         the same invocation again in the warm worker: ``--n`` round trips per mode
  new key      a deployment's first invocation in an account's runner that is already warm
               (another deployment ran there): what a deployment's own realm costs it
  memory       RSS of one idle runner's whole process tree after its first invocation

Then (unless ``--no-benches``) ``bench/cold_deploy.py --k 5`` and ``bench/workflow_steps.py
--quick`` run once with ``SLUICE_SANDBOX=on`` and once with ``off``, and their p50s are shown
side by side.

Budget (issue 10): warm invocation overhead +0.1 ms at most; runner cold start under 150 ms.

Run:  .venv/bin/python bench/sandbox.py [--n 2000] [--cold 10] [--no-benches]
Results: printed table, and bench/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _server import RESULTS_DIR, TRIVIAL_SOURCE, environment, summary, write_results

HERE = Path(__file__).resolve().parent


def _invocation(owner: str, entry: Path, key: str = "dc_bench:hash") -> Any:
    from sluice.runtime.pool import Invocation

    return Invocation(
        owner_id=owner,
        worker_key=key,
        entry=str(entry),
        call={
            "kind": "run",
            "event": {"n": 0},
            "props": {},
            "db": {},
            "context": {"id": "x", "deployment_id": "dc_bench", "owner_id": owner},
        },
        timeout_ms=60_000,
        memory_mb=256,
    )


async def _measure(n: int, cold: int) -> dict[str, dict[str, Any]]:
    from sluice.runtime.pool import PoolConfig, RunnerPool
    from sluice.runtime.runner import _tree_rss
    from sluice.runtime.sandbox import Sandbox, SandboxConfig

    with tempfile.TemporaryDirectory(prefix="sluice-bench-sandbox-") as tmp:
        components = Path(tmp) / "components"
        store = Path(tmp) / "npm-store"
        (components / ("0" * 64)).mkdir(parents=True)
        store.mkdir()
        entry = components / ("0" * 64) / "component.mjs"
        entry.write_text(TRIVIAL_SOURCE)
        config = SandboxConfig(components_dir=components, npm_store_dir=store)
        pools = {
            "on": RunnerPool(PoolConfig(max_runners=4), Sandbox(config)),
            "off": RunnerPool(PoolConfig(max_runners=4)),
        }
        out: dict[str, dict[str, Any]] = {
            m: {"start": [], "cold": [], "new_key": [], "warm": [], "rss": []} for m in pools
        }
        async with pools["on"], pools["off"]:
            for i in range(cold):
                for mode, pool in pools.items():
                    owner = f"start-{mode}-{i}"
                    t0 = time.perf_counter()
                    runner = await pool._runner_for(owner)
                    await runner.call({"type": "stats"})
                    out[mode]["start"].append((time.perf_counter() - t0) * 1000)
                    pool._leases[owner] -= 1
                    await runner.close()
            for i in range(cold):
                for mode, pool in pools.items():
                    owner = f"cold-{mode}-{i}"
                    t0 = time.perf_counter()
                    result = await pool.invoke(_invocation(owner, entry))
                    out[mode]["cold"].append((time.perf_counter() - t0) * 1000)
                    assert result.ok, result.error
                    runner = pool.runner(owner)
                    assert runner is not None and runner.pid is not None
                    out[mode]["rss"].append(_tree_rss(runner.pid) / 1e6)
                    await runner.close()
            warm = {m: _invocation(f"warm-{m}", entry) for m in pools}
            for mode, pool in pools.items():
                for _ in range(200):
                    await pool.invoke(warm[mode])
            for _ in range(n):
                for mode, pool in pools.items():
                    t0 = time.perf_counter()
                    result = await pool.invoke(warm[mode])
                    out[mode]["warm"].append((time.perf_counter() - t0) * 1000)
                    assert result.ok
            # Each new key is a new deployment of the warm account (its entry file the same).
            for i in range(cold * 5):
                for mode, pool in pools.items():
                    t0 = time.perf_counter()
                    result = await pool.invoke(_invocation(f"warm-{mode}", entry, f"dc_new{i}:h"))
                    out[mode]["new_key"].append((time.perf_counter() - t0) * 1000)
                    assert result.ok, result.error
    return {m: {k: summary(v) for k, v in d.items()} for m, d in out.items()}


def _bench(script: str, args: list[str], sandbox: str) -> dict[str, Any]:
    env = {**os.environ, "SLUICE_SANDBOX": sandbox}
    subprocess.run(
        [sys.executable, str(HERE / script), *args], env=env, check=True, stdout=subprocess.DEVNULL
    )
    name = script.removesuffix(".py")
    data: dict[str, Any] = json.loads((RESULTS_DIR / f"{name}.json").read_text())
    return data


def _p50s(data: Any, prefix: str = "") -> dict[str, float]:
    """Every p50 in a results file, by dotted path."""
    found: dict[str, float] = {}
    if isinstance(data, dict):
        if "p50" in data and isinstance(data["p50"], int | float):
            found[prefix.rstrip(".")] = float(data["p50"])
        for key, value in data.items():
            found.update(_p50s(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found.update(_p50s(value, f"{prefix}{i}."))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="warm invocations per mode")
    parser.add_argument("--cold", type=int, default=10, help="cold starts per mode")
    parser.add_argument("--benches", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    env = environment()
    figures = asyncio.run(_measure(args.n, args.cold))
    print(f"Sandbox cost, RunnerPool direct (uid {os.geteuid()}; cpus {env['cpus']})")
    print(f"{'':24}{'sandbox on':>14}{'off':>12}{'on - off':>12}{'on / off':>10}")
    rows = [
        ("runner start p50 (ms)", "start"),
        ("cold start p50 (ms)", "cold"),
        ("new key p50 (ms)", "new_key"),
        ("warm p50 (ms)", "warm"),
        ("warm p99 (ms)", "warm"),
        ("runner RSS p50 (MB)", "rss"),
    ]
    for label, key in rows:
        pct = "p99" if "p99" in label else "p50"
        on, off = figures["on"][key][pct], figures["off"][key][pct]
        print(f"{label:24}{on:14.3f}{off:12.3f}{on - off:12.3f}{on / off:10.2f}")
    benches: dict[str, Any] = {}
    if args.benches:
        for script, extra in (("cold_deploy.py", ["--k", "5"]), ("workflow_steps.py", ["--quick"])):
            both = {mode: _p50s(_bench(script, extra, mode)) for mode in ("on", "off")}
            benches[script] = both
            print(f"\n{script} {' '.join(extra)}: p50 (ms)")
            for key in both["on"]:
                if key in both["off"] and both["off"][key] > 0:
                    on, off = both["on"][key], both["off"][key]
                    print(f"  {key:52}{on:10.2f}{off:10.2f}{on / off:8.2f}x")
    path = write_results("sandbox", {"environment": env, "direct": figures, "benches": benches})
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
