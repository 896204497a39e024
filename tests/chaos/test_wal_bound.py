"""Chaos (issue 30): SQLite's WAL stays under its bound during a burst against a real
``sluice serve``. Without checkpoints while Sluice ran, every commit grew the WAL (377 MiB
after 90 s at 100 req/s); here a bound of 4 MiB is kept, with a little slack for what one
checkpoint interval adds, while the burst writes many times that, and the WAL is small again
once the queue has drained. Loopback only; the burst is bounded in count and time."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.chaos.processes import Sluice, free_port, running
from tests.chaos.test_restarts import _deploy, _env

BOUND_MB = 4
INTERVAL_S = 0.25
#: What the writes of a checkpoint interval or two can add past the bound (10-18 KiB of WAL a
#: request, a few hundred requests a quarter second here).
SLACK_MB = 20
REQUESTS = 4_000
BURST_S = 40.0
#: The burst and the drain last at least this long, however fast the machine.
BURST_S_MIN = 2.0


def _sample(wal: Path, peak: list[int], stop: threading.Event) -> None:
    while not stop.wait(0.02):
        with contextlib.suppress(FileNotFoundError):
            peak[0] = max(peak[0], wal.stat().st_size)


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.timeout(600)
def test_the_wal_stays_under_its_bound_during_a_burst(tmp_path: Path) -> None:
    asyncio.run(_burst(tmp_path))


async def _burst(tmp_path: Path) -> None:
    env = {
        **_env(tmp_path / "data", ""),
        "SLUICE_SQLITE_WAL_MAX_MB": str(BOUND_MB),
        "SLUICE_SQLITE_CHECKPOINT_SECONDS": str(INTERVAL_S),
    }
    server = Sluice("all", env, port=free_port())
    base = f"http://127.0.0.1:{server.port}"
    wal = tmp_path / "data" / "sluice.db-wal"
    peak, stop = [0], threading.Event()
    sampler = threading.Thread(target=_sample, args=(wal, peak, stop), daemon=True)
    with running(server):
        server.start()
        _, path = _deploy(base, env)
        sampler.start()
        acked = 0
        sent = 0
        deadline = time.monotonic() + BURST_S
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:

            async def client() -> None:
                nonlocal acked, sent
                while sent < REQUESTS and time.monotonic() < deadline:
                    sent += 1
                    answer = await http.post(path, json={"n": sent, "pad": "x" * 500})
                    acked += answer.status_code == 200

            await asyncio.gather(*(client() for _ in range(16)))
            # Until the queue has drained (the runs write too), bounded.
            settle = time.monotonic() + 120
            while time.monotonic() < settle:
                metrics = (await http.get("/metrics")).text
                if _metric(metrics, "sluice_job_oldest_queued_age_seconds") == 0 and not any(
                    _metric(metrics, f'sluice_jobs{{kind="http",state="{s}"}}') for s in
                    ("queued", "running")
                ):  # fmt: skip
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(3 * INTERVAL_S)  # a last checkpoint after the last write
            metrics = (await http.get("/metrics")).text
        stop.set()
        sampler.join()
        assert acked >= 1_000, f"only {acked} of {sent} requests acknowledged"
        checkpoints = sum(
            _metric(metrics, f'sluice_sqlite_checkpoints_total{{mode="{mode}"}}')
            for mode in ("passive", "truncate")
        )
        # The burst wrote many times the bound (~16 KiB of WAL a request: the same burst
        # without checkpoints grew the WAL to 42 MiB in a run here): checkpoints ran throughout ...
        assert checkpoints >= BURST_S_MIN / INTERVAL_S, metrics
        # ... and the WAL never grew past the bound by more than an interval's writes.
        assert peak[0] <= (BOUND_MB + SLACK_MB) << 20, f"peak WAL {peak[0] / 2**20:.1f} MiB"
        assert wal.stat().st_size <= BOUND_MB << 20, f"WAL {wal.stat().st_size} bytes after"
        assert server.stop() in (0, -15), server.tail()
