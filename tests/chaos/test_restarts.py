"""Chaos (issue 16): real Sluice processes killed under a steady load of webhook requests.

PostgreSQL (a private cluster, so it can be crashed): one ``api`` process and two ``worker``
processes share it; while requests keep coming, a worker is killed (``kill -9``) and started
again, a Node runner is killed, the api process is killed and started again, and PostgreSQL
itself crashes and restarts. SQLite: one process killed and started again. Afterwards:

- every acknowledged request is stored exactly once (one event each: a run that was cut off
  before its commit ran again; none ran twice after its commit);
- nothing is stuck: every job is done within a bound after the last fault;
- the processes that were not killed kept working without a restart.

Every request goes to 127.0.0.1; the load is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests import zygote
from tests.chaos.processes import Postgres, Sluice, free_port, running, stored_sqlite

SOURCE = """
export default { name: "chaos", version: "1", props: { http: "$.interface.http" },
  async run(event) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    this.$emit({ n: event.body.n });
  } };
"""
REQUESTS = 360
#: After the last fault, every acknowledged request must be run and stored within this.
SETTLE_S = 90.0


def _env(data_dir: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATA_DIR": str(data_dir),
        "SLUICE_DATABASE_URL": database_url,
        "SLUICE_JOB_LEASE_SECONDS": "3",
        "SLUICE_JOB_POLL_SECONDS": "0.2",
        "SLUICE_SHUTDOWN_GRACE_SECONDS": "5",
        "SLUICE_HTTP_RATE_PER_SECOND": "0",
        "SLUICE_EVENT_RETENTION": "100000",
        "SLUICE_STREAM_POLL_SECONDS": "0",
    }


def _deploy(base: str, env: dict[str, str]) -> tuple[str, str]:
    """An account and its HTTP source: (source id, endpoint path)."""
    created = zygote.run(
        ["accounts", "create", "--name", "chaos"],
        env=env,
        check=True,
        timeout=120,
    )
    key = json.loads(created.stdout)["api_key"]
    headers = {"Authorization": f"Bearer {key}"}
    made = httpx.post(
        f"{base}/v1/sources", json={"component_code": SOURCE}, headers=headers, timeout=120
    )
    assert made.status_code == 200, made.text
    source = made.json()["data"]
    return source["id"], "/e/" + source["endpoint_url"].rsplit("/", 1)[1]


async def _load(
    base: str, path: str, faults: list[tuple[int, Callable[[], Awaitable[None]]]]
) -> set[int]:
    """Send requests, four at a time, until ``REQUESTS`` were acknowledged (a 200); run each
    fault once that many were. Each request has its own number, retries included (a request
    whose answer was lost may be stored: it is a request of its own). The numbers of the
    acknowledged ones."""
    acked: set[int] = set()
    sent = 0
    deadline = time.monotonic() + 300

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal sent
        while len(acked) < REQUESTS and time.monotonic() < deadline:
            n = sent
            sent += 1
            try:
                answer = await http.post(path, json={"n": n})
            except httpx.HTTPError:
                await asyncio.sleep(0.05)  # the api process is down: do not spin
                continue
            if answer.status_code == 200:
                acked.add(n)

    async def chaos() -> None:
        for after, fault in faults:
            while len(acked) < after and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await fault()

    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        await asyncio.gather(chaos(), *(client(http) for _ in range(4)))
    assert len(acked) >= REQUESTS, f"only {len(acked)} requests acknowledged in time"
    return acked


async def _settled(
    read: Callable[[], Awaitable[tuple[list[int], dict[str, int]]]],
) -> tuple[list[int], dict[str, int]]:
    """Poll storage until no job is queued or running (bounded by ``SETTLE_S``)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        numbers, states = await read()
        if not states.get("queued") and not states.get("running"):
            return numbers, states
        if time.monotonic() > deadline:
            pytest.fail(f"jobs still pending {SETTLE_S:g} s after the last fault: {states}")
        await asyncio.sleep(0.25)


def _check(acked: set[int], numbers: list[int], states: dict[str, int], notes: str = "") -> None:
    """``notes``: what else to show when a request is missing (the source's warnings)."""
    counts: dict[int, int] = {}
    for n in numbers:
        counts[n] = counts.get(n, 0) + 1
    missing = sorted(n for n in acked if n not in counts)
    assert not missing, f"acknowledged but not stored: {missing}; {states}; {notes}"
    doubled = sorted(n for n, c in counts.items() if c > 1)
    assert not doubled, f"stored more than once: {doubled}"
    assert not states.get("failed"), f"jobs failed: {states}"


def _stopped_gracefully(process: Sluice) -> bool:
    """SIGTERM: a clean exit (uvicorn re-raises the signal once it has shut down)."""
    return process.stop() in (0, -signal.SIGTERM)


@pytest.mark.timeout(600)
def test_postgresql_processes_killed_under_load(tmp_path: Path) -> None:
    # Not under tmp_path: pytest's directories are private to root, and the server runs as
    # the postgres user.
    with tempfile.TemporaryDirectory(prefix="sluice-chaos-pg-") as directory:
        pg = Postgres(Path(directory)).init()
        try:
            asyncio.run(_postgresql_chaos(tmp_path, pg))
        finally:
            pg.stop()


async def _postgresql_chaos(tmp_path: Path, pg: Postgres) -> None:
    env = _env(tmp_path / "data", pg.url)
    api = Sluice("api", env, port=free_port())
    workers = [Sluice("worker", env), Sluice("worker", env)]
    base = f"http://127.0.0.1:{api.port}"
    with running(api, *workers):
        api.start()
        for worker in workers:
            worker.start()
        source_id, path = _deploy(base, env)

        async def kill_worker() -> None:
            workers[0].kill()
            await asyncio.to_thread(workers[0].start)

        killed: list[int] = []

        async def kill_runner() -> None:
            for worker in workers:
                for pid in worker.node_pids():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

        async def kill_api() -> None:
            api.kill()
            await asyncio.to_thread(api.start)

        async def crash_postgres() -> None:
            await asyncio.to_thread(pg.crash)
            await asyncio.to_thread(pg.start)

        acked = await _load(
            base,
            path,
            [(60, kill_worker), (120, kill_runner), (180, kill_api), (260, crash_postgres)],
        )

        numbers, states = await _settled(lambda: pg.stored(source_id))
        _check(acked, numbers, states)
        assert killed, "no Node runner was running to kill"
        # The survivors worked on without a restart: the api answers, the other worker runs.
        survivor = workers[1].proc
        assert survivor is not None and survivor.poll() is None
        last = httpx.post(f"{base}{path}", json={"n": -1}, timeout=30)
        assert last.status_code == 200, last.text + api.tail()
        for process in (api, *workers):
            assert _stopped_gracefully(process), process.tail()


@pytest.mark.timeout(600)
def test_sqlite_process_killed_and_started_again(tmp_path: Path) -> None:
    asyncio.run(_sqlite_chaos(tmp_path))


async def _sqlite_chaos(tmp_path: Path) -> None:
    env = _env(tmp_path / "data", "")
    server = Sluice("all", env, port=free_port())
    base = f"http://127.0.0.1:{server.port}"
    with running(server):
        server.start()
        source_id, path = _deploy(base, env)

        async def kill_server() -> None:
            server.kill()
            await asyncio.to_thread(server.start)

        acked = await _load(base, path, [(150, kill_server)])
        database = tmp_path / "data" / "sluice.db"
        numbers, states = await _settled(
            lambda: asyncio.to_thread(stored_sqlite, database, source_id)
        )
        engine = sa.create_engine(f"sqlite:///{database}")
        try:
            with engine.connect() as conn:
                warned = conn.execute(
                    sa.text(
                        "SELECT level, msg FROM logs WHERE emitter_id = :e AND level != 'info' "
                        "ORDER BY pk DESC LIMIT 20"
                    ),
                    {"e": source_id},
                ).all()
        finally:
            engine.dispose()
        _check(acked, numbers, states, f"the source's warnings: {[tuple(w) for w in warned]}")
        assert _stopped_gracefully(server), server.tail()
