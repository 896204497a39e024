"""Fair sharing between accounts (issue 10, part 3): each test is an attack by an ordinary
account, written as the attacker's component and run against the real platform on both
dialects. Before the fix each attack succeeded; now each meets a limit with a clear error."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
import sqlalchemy as sa

from sluice.api.app import serving
from sluice.domain import limits
from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import Finish, JobWorker
from sluice.platform import Platform
from sluice.runtime import protocol
from sluice.runtime.protocol import Result
from sluice.storage import jobs, runs, sources
from sluice.storage.jobs import Job
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api, account_client

#: An HTTP source whose run() never resolves: each request holds a job slot until its time-out.
HANG = """
export default {
  name: "Hang",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() { await new Promise(() => {}); },
};
"""

#: The victim's webhook: emits what it receives.
WEBHOOK = """
export default {
  name: "Webhook",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};
"""

#: 100k emits in one invocation.
FLOOD = """
export default {
  name: "Flood",
  version: "0.0.1",
  async run() { for (let i = 0; i < 100000; i++) this.$emit({ i }); },
};
"""

#: A store far over the 60 KB limit, next to a small write and an emit.
HOG = """
export default {
  name: "Hog",
  version: "0.0.1",
  props: { db: "$.service.db" },
  async run() {
    this.db.set("small", 1);
    this.db.set("big", "x".repeat(5_000_000));
    this.$emit({ wrote: true });
  },
};
"""


@pytest_asyncio.fixture(loop_scope="session")
async def attacker(platform: Platform) -> AsyncIterator[Api]:
    async with account_client(platform, f"attacker-{secrets.token_hex(3)}") as a:
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def victim(platform: Platform) -> AsyncIterator[Api]:
    async with account_client(platform, f"victim-{secrets.token_hex(3)}") as a:
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def public(platform: Platform) -> AsyncIterator[httpx.AsyncClient]:
    """Endpoints are public: no API key."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(platform)),
        base_url="http://sluice.test",
        timeout=60,
    ) as client:
        yield client


async def _deploy(api: Api, code: str) -> tuple[str, str | None]:
    """(source id, endpoint path or None)."""
    response = await api.client.post("/v1/sources", json={"component_code": code})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    url = data.get("endpoint_url")
    return data["id"], ("/e/" + url.rsplit("/", 1)[1]) if url else None


async def _events(api: Api, source_id: str) -> list[Any]:
    page = await api.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event", "limit": 100}
    )
    assert page.status_code == 200, page.text
    return [item["event"] for item in reversed(page.json()["data"])]


async def _log_text(api: Api, source_id: str) -> str:
    page = await api.client.get(f"/v1/sources/{source_id}/logs")
    assert page.status_code == 200, page.text
    return "\n".join(str(entry) for entry in page.json()["data"])


async def _statuses(platform: Platform, target_id: str) -> list[str]:
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.status)
            .where(jobs_table.c.target_id == target_id)
            .order_by(jobs_table.c.id)
        )
        return [r.status for r in rows]


async def test_one_account_cannot_hold_every_job_slot(
    platform: Platform, attacker: Api, victim: Api, public: httpx.AsyncClient
) -> None:
    """10 requests to a source that never resolves used to hold all 8 slots: the victim's
    webhook waited for the source time-out. Now the attacker holds its share, the rest of its
    jobs stay queued in order, and the victim's run goes at once."""
    hang_id, hang_path = await _deploy(attacker, HANG)
    hook_id, hook_path = await _deploy(victim, WEBHOOK)
    assert hang_path and hook_path
    for _ in range(10):
        assert (await public.post(hang_path, json={})).status_code == 200
    assert (await public.post(hook_path, json={"order": 7})).status_code == 200

    # A worker configured as the platform's (its slots and share), driven by its own loop.
    worker = JobWorker(
        platform.db, platform.clock, dataclasses.replace(platform.jobs.config, poll_seconds=30)
    )
    victim_done = asyncio.Event()

    async def run_http(job: Job, finish: Finish) -> None:
        await platform.jobs.handlers[JobKind.HTTP](job, finish)
        if job.target_id == hook_id:
            victim_done.set()

    worker.handlers[JobKind.HTTP] = run_http
    await worker.start()
    worker.notify()
    try:
        # Before the fix this waited for the attacker's runs to time out (20 s in tests).
        await asyncio.wait_for(victim_done.wait(), 10)
        assert await _events(victim, hook_id) == [{"order": 7}]
        statuses = await _statuses(platform, hang_id)
        share = platform.settings.account_max_concurrency
        assert share < worker.config.concurrency
        # The attacker's share runs; the rest wait (not failed, not lost): a few held by the
        # worker (claimed, not started, at most the share of them), the others queued.
        held = [job for job in worker._queue if job.target_id == hang_id]
        async with platform.db.connect() as conn:
            attacker_id = (
                await conn.execute(
                    sa.select(jobs_table.c.owner_id).where(jobs_table.c.target_id == hang_id)
                )
            ).scalar()
        assert worker.slots.busy[attacker_id] == share and len(held) <= share
        assert statuses.count("running") == share + len(held)
        assert statuses.count("queued") == 10 - share - len(held)
    finally:
        await worker.stop()
        async with platform.db.begin() as conn:  # the hanging runs are not run again
            await jobs.delete_for(conn, hang_id)


async def test_a_flood_of_emits_fails_at_the_cap(attacker: Api) -> None:
    """100k ``$emit`` calls in one invocation used to be decoded and stored (stalling the API
    for seconds). Now the invocation fails with EMIT_LIMIT and only the first ones are kept."""
    flood_id, _ = await _deploy(attacker, FLOOD)
    response = await attacker.client.post(f"/v1/sources/{flood_id}/run", json={})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["ok"] is False and data["error"]["code"] == "EMIT_LIMIT"
    cap = attacker.platform.settings.max_emits_per_invocation
    assert str(cap) in data["error"]["message"]
    assert len(data["emitted"]) == cap
    # The first ones, in order (the newest 100 are listed), nothing past the cap.
    assert [e["i"] for e in await _events(attacker, flood_id)] == list(range(cap - 100, cap))
    assert "EMIT_LIMIT" in await _log_text(attacker, flood_id)


#: Three 4 MB events: 12 MB of results from one invocation.
BIG_EMITS = """
export default {
  name: "Big emits",
  version: "0.0.1",
  async run() { for (let i = 0; i < 3; i++) this.$emit({ i, pad: "x".repeat(4 * 1024 * 1024) }); },
};
"""


async def test_results_past_the_payload_limit_fail_the_invocation(attacker: Api) -> None:
    """Events of any size used to be decoded and stored (a few 10 MB emits grew the database
    by their size per run). Now results over 8 MB fail with PAYLOAD_LIMIT, keeping none."""
    big_id, _ = await _deploy(attacker, BIG_EMITS)
    response = await attacker.client.post(f"/v1/sources/{big_id}/run", json={})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["ok"] is False and data["error"]["code"] == "PAYLOAD_LIMIT", data["error"]
    assert data["emitted"] == []
    assert await _events(attacker, big_id) == []
    assert "PAYLOAD_LIMIT" in await _log_text(attacker, big_id)


def test_a_forged_result_keeps_the_log_caps() -> None:
    """User code can write to its runner's socket itself, so the runner's log caps (1,000
    lines of 16 KB) are kept again where Python decodes a result."""
    line = {"ts": 1, "level": "info", "msg": "y" * 1_000_000, "step": "s" * 10_000}
    result = protocol.decode_result({"ok": True, "logs": [line] * 5000 + ["not a line"]})
    assert len(result.logs) == limits.MAX_LOGS
    assert all(len(entry["msg"]) <= limits.MAX_LOG_CHARS for entry in result.logs)
    assert "step" not in result.logs[0]  # a step id that long is no step's
    assert result.logs[-1]["msg"].startswith("[sluice] 4002 log entries dropped")


async def test_a_store_over_max_db_bytes_is_refused(attacker: Api) -> None:
    """A 5 MB ``this.db.set`` used to be stored (the 60 KB ``max_db_bytes`` was never checked).
    Now the set() throws DB_LIMIT in the user's code (the value never reaches Python), the
    invocation fails and none of its db writes are saved."""
    platform = attacker.platform
    hog_id, _ = await _deploy(attacker, HOG)
    response = await attacker.client.post(f"/v1/sources/{hog_id}/run", json={})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["ok"] is False and data["error"]["code"] == "DB_LIMIT"
    assert str(platform.settings.max_db_bytes) in data["error"]["message"]
    async with platform.db.connect() as conn:
        assert await sources.read_state(conn, hog_id) == {}
    # The worker refuses the set() itself, so the run stops there: the emit after it never ran.
    assert await _events(attacker, hog_id) == []
    assert "DB_LIMIT" in await _log_text(attacker, hog_id)

    # A forged runner result cannot bypass it: the limit is checked where writes are applied.
    deployment = await platform.sources.get(attacker.account_id, hog_id)
    component = await platform.invoker.components.by_id(deployment.component_id)
    forged = Result(ok=True, db_writes={"big": "y" * (platform.settings.max_db_bytes + 1)})
    outcome = await platform.invoker.persist(deployment, component, "forged", forged)
    assert outcome.result.error is not None and outcome.result.error["code"] == "DB_LIMIT"
    async with platform.db.connect() as conn:
        assert await sources.read_state(conn, hog_id) == {}


async def test_an_http_source_without_custom_response_has_its_own_time_out(
    platform: Platform, attacker: Api, public: httpx.AsyncClient
) -> None:
    """The client of a source without ``customResponse`` is answered at once; its run ends at
    the HTTP source time-out (``SLUICE_HTTP_SOURCE_TIMEOUT_SECONDS``), not the longer source
    time-out, so a run that never resolves frees its slot soon."""
    hang_id, hang_path = await _deploy(attacker, HANG)
    assert hang_path
    http_jobs = platform.jobs.handlers[JobKind.HTTP]
    saved = http_jobs.run_timeout_seconds
    http_jobs.run_timeout_seconds = 0.5
    assert (await public.post(hang_path, json={})).status_code == 200
    try:
        await asyncio.wait_for(platform.jobs.drain(), 10)
    finally:
        http_jobs.run_timeout_seconds = saved
    assert await _statuses(platform, hang_id) == ["done"]
    assert "TIMEOUT" in await _log_text(attacker, hang_id)


async def test_a_workflow_steps_store_over_max_db_bytes_is_refused(attacker: Api) -> None:
    """A code step's ``this.db`` has the same limit: the set() throws DB_LIMIT, the run fails
    at that step, and the store keeps what it had."""
    from tests.integration.test_workflows import create, run, step

    hog = step(
        "hog",
        'props: { db: "$.service.db" }, async run() { this.db.set("n", 1); '
        'if (this.db.get("big") === undefined) this.db.set("big", "x".repeat(200000)); '
        "return 1; }",
    )
    workflow = await create(attacker, [hog])
    result = await run(attacker, workflow["id"], {})
    assert result["status"] != "success", result
    assert "DB_LIMIT" in str(result), result
    platform = attacker.platform
    step_id = (await attacker.client.get(f"/v1/workflows/{workflow['id']}")).json()["data"][
        "steps"
    ][0]["id"]
    async with platform.db.connect() as conn:
        states = await conn.run_sync(runs.step_states_sync, [step_id])
    assert "big" not in states[step_id]
