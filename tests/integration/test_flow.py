"""``$.flow.delay``, ``$.flow.suspend`` and ``$.flow.rerun`` end to end: real Node, both
dialects, a fake clock moving the time, and the platform closed and opened again on the same
database while runs wait (their ``resume`` jobs are durable)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.api.app import serving
from sluice.clock import FakeClock
from sluice.config import Settings
from sluice.platform import Platform
from tests.conftest import SKIP_PG, _create_pg_database, _drop_pg_database, make_settings
from tests.integration.test_workflows import step

BASE = "https://sluice.example"


@pytest_asyncio.fixture(loop_scope="session", params=["sqlite", "postgresql"])
async def settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    url = ""
    if request.param == "postgresql":
        if SKIP_PG:
            pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
        url = await _create_pg_database()
    try:
        yield make_settings(tmp_path, database_url=url, public_url=BASE)
    finally:
        if url:
            await _drop_pg_database(url)


@dataclass
class Session:
    platform: Platform
    client: httpx.AsyncClient

    async def run(self, workflow_id: str, event: Any = None) -> dict[str, Any]:
        response = await self.client.post(
            f"/v1/workflows/{workflow_id}/runs", json={"event": event}
        )
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    async def read(self, run_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    async def call(self, url: str, **kwargs: Any) -> httpx.Response:
        assert url.startswith(BASE + "/flow/"), url
        return await self.client.post(url.removeprefix(BASE), **kwargs)


@contextlib.asynccontextmanager
async def opened(settings: Settings, clock: FakeClock, key: str) -> AsyncIterator[Session]:
    async with contextlib.AsyncExitStack() as stack:
        platform = await stack.enter_async_context(
            Platform.open(settings, clock=clock, background=False)
        )
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=serving(platform)),
                base_url="http://sluice.test",
                headers={"Authorization": f"Bearer {key}"} if key else {},
                timeout=60,
            )
        )
        yield Session(platform, client)


async def setup(
    settings: Settings, clock: FakeClock, steps: list[dict[str, Any]]
) -> tuple[str, str]:
    """An account and a workflow of ``steps``: (api key, workflow id)."""
    async with opened(settings, clock, "") as s:
        name = f"flow-{secrets.token_hex(3)}"
        _account, key = await s.platform.create_account(name, f"{name}@example.com")
        s.client.headers["Authorization"] = f"Bearer {key}"
        body = {"name": "flow", "trigger": {"type": "manual"}, "steps": steps}
        response = await s.client.post("/v1/workflows", json=body)
        assert response.status_code == 200, response.text
        return key, str(response.json()["data"]["id"])


AFTER = step(
    "after",
    "async run({ steps, $ }) { return { note: steps.wait.note, n: steps.wait.$return_value.n, "
    "data: steps.wait.$resume_data ?? null, event: steps.trigger.event }; }",
)


def code(name: str, body: str) -> dict[str, Any]:
    return step(name, f"async run({{ steps, $ }}) {{ {body} }}")


async def test_delay_resumes_at_the_next_step_after_a_restart(settings: Settings) -> None:
    clock = FakeClock()
    wait = code(
        "wait",
        '$.export("note", "before"); const urls = $.flow.delay(60000); '
        "return { urls, n: steps.trigger.event.n };",
    )
    key, workflow_id = await setup(settings, clock, [wait, AFTER])
    async with opened(settings, clock, key) as s:
        run = await s.run(workflow_id, {"n": 7})
        assert run["status"] == "delayed"
        [paused] = run["steps"]
        assert paused["status"] == "delayed" and paused["pause"]["kind"] == "delay"
        urls = paused["return_value"]["urls"]
        assert urls["resume_url"].startswith(f"{BASE}/flow/{run['id']}/resume/")
        assert urls["cancel_url"].startswith(f"{BASE}/flow/{run['id']}/cancel/")
    clock.advance(seconds=59)
    async with opened(settings, clock, key) as s:
        assert await s.platform.jobs.drain() == 0
        assert (await s.read(run["id"]))["status"] == "delayed"
    clock.advance(seconds=2)
    async with opened(settings, clock, key) as s:
        assert await s.platform.jobs.drain() == 1
        done = await s.read(run["id"])
    assert done["status"] == "success", done
    assert [x["status"] for x in done["steps"]] == ["success", "success"]
    assert done["steps"][1]["return_value"] == {
        "note": "before",
        "n": 7,
        "data": None,
        "event": {"n": 7},
    }


async def test_suspend_is_resumed_with_the_request_body(settings: Settings) -> None:
    clock = FakeClock()
    wait = code("wait", "const urls = $.flow.suspend(3600000); return { urls, n: 1 };")
    key, workflow_id = await setup(settings, clock, [wait, AFTER])
    async with opened(settings, clock, key) as s:
        run = await s.run(workflow_id, {"x": 1})
        assert run["status"] == "suspended" and run["steps"][0]["status"] == "suspended"
        urls = run["steps"][0]["return_value"]["urls"]
        wrong = urls["resume_url"].rsplit("/", 1)[0] + "/" + "x" * 32
        assert (await s.call(wrong, json={})).status_code == 404
        # A cancel secret does not resume, nor a resume secret cancel.
        swapped = urls["resume_url"].replace("/resume/", "/cancel/")
        assert (await s.call(swapped)).status_code == 404
    async with opened(settings, clock, key) as s:
        answer = await s.call(urls["resume_url"], json={"approved": True})
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"] == {"run_id": run["id"], "status": "resuming"}
        again = await s.call(urls["resume_url"], json={"approved": False})
        assert again.status_code == 409
        assert await s.platform.jobs.drain() == 1
        done = await s.read(run["id"])
        assert (await s.call(urls["cancel_url"])).status_code == 404
    assert done["status"] == "success"
    assert done["steps"][0]["exports"]["$resume_data"] == {"approved": True}
    assert done["steps"][1]["return_value"]["data"] == {"approved": True}


async def test_suspend_cancelled_and_timed_out(settings: Settings) -> None:
    clock = FakeClock()
    wait = code("wait", "return { urls: $.flow.suspend(1000) };")
    never = code("never", 'throw new Error("must not run");')
    key, workflow_id = await setup(settings, clock, [wait, never])
    async with opened(settings, clock, key) as s:
        first = await s.run(workflow_id)
        second = await s.run(workflow_id)
        cancel = first["steps"][0]["return_value"]["urls"]["cancel_url"]
        answer = await s.call(cancel)
        assert answer.json()["data"]["status"] == "cancelling"
        assert await s.platform.jobs.drain() == 1
        cancelled = await s.read(first["id"])
        assert (await s.read(second["id"]))["status"] == "suspended"
    assert cancelled["status"] == "cancelled"
    assert cancelled["steps"][0]["status"] == "cancelled"
    assert cancelled["steps"][0]["flow"] == {"kind": "suspend", "outcome": "cancelled"}
    assert len(cancelled["steps"]) == 1
    clock.advance(seconds=1)
    async with opened(settings, clock, key) as s:
        assert await s.platform.jobs.drain() == 1
        timed_out = await s.read(second["id"])
    assert timed_out["status"] == "cancelled"
    assert timed_out["steps"][0]["flow"] == {"kind": "suspend", "outcome": "timed_out"}


RERUNS = code(
    "poll",
    "const run = $.context.run; $.export(`run${run.runs}`, run.context ?? null); "
    "if (run.runs < 3) return $.flow.rerun(5000, { seen: run.runs }, 5); "
    "return { runs: run.runs, context: run.context, callback: run.callback_request ?? null };",
)


async def test_rerun_counts_runs_and_carries_its_context(settings: Settings) -> None:
    clock = FakeClock()
    after = code("after", "return steps.poll.$return_value;")
    key, workflow_id = await setup(settings, clock, [RERUNS, after])
    async with opened(settings, clock, key) as s:
        run = await s.run(workflow_id)
        assert run["status"] == "delayed" and run["steps"][0]["status"] == "rerun"
    clock.advance(seconds=5)
    async with opened(settings, clock, key) as s:
        assert await s.platform.jobs.drain() == 1
        second = await s.read(run["id"])
        assert second["status"] == "delayed"
        assert [x["runs"] for x in second["steps"]] == [2]
        # The resume URL reruns it now, with the request as callback_request.
        urls = second["steps"][0]["return_value"]
        answer = await s.call(urls["resume_url"], json={"job": "done"})
        assert answer.status_code == 200, answer.text
        assert await s.platform.jobs.drain() == 1
        done = await s.read(run["id"])
    assert done["status"] == "success", done
    poll, after_record = done["steps"]
    assert poll["runs"] == 3 and poll["exports"] == {"run3": {"seen": 2}}
    value = after_record["return_value"]
    assert value["runs"] == 3 and value["context"] == {"seen": 2}
    assert value["callback"]["body"] == {"job": "done"}
    assert value["callback"]["method"] == "POST"


async def test_rerun_stops_at_max_reruns(settings: Settings) -> None:
    clock = FakeClock()
    always = code("poll", "return $.flow.rerun(1000, null, 2);")
    key, workflow_id = await setup(settings, clock, [always])
    async with opened(settings, clock, key) as s:
        run = await s.run(workflow_id)
        for _ in range(2):
            clock.advance(seconds=1)
            assert await s.platform.jobs.drain() >= 1
        done = await s.read(run["id"])
    assert done["status"] == "error"
    assert done["error"]["code"] == "RERUN_LIMIT"
    assert done["steps"][0]["runs"] == 3


async def test_a_delay_resumed_early_or_cancelled_by_its_urls(settings: Settings) -> None:
    clock = FakeClock()
    wait = code("wait", "return { urls: $.flow.delay(3600000), n: 1 };")
    key, workflow_id = await setup(settings, clock, [wait, AFTER])
    async with opened(settings, clock, key) as s:
        early, cancelled = await s.run(workflow_id), await s.run(workflow_id)
        resume = early["steps"][0]["return_value"]["urls"]["resume_url"]
        got = await s.client.get(resume.removeprefix(BASE))  # a browser opening the link
        assert got.status_code == 200, got.text
        cancel = cancelled["steps"][0]["return_value"]["urls"]["cancel_url"]
        assert (await s.call(cancel)).status_code == 200
        assert await s.platform.jobs.drain() == 2
        done, stopped = await s.read(early["id"]), await s.read(cancelled["id"])
    assert done["status"] == "success" and done["steps"][1]["return_value"]["n"] == 1
    assert stopped["status"] == "cancelled" and len(stopped["steps"]) == 1
    assert stopped["steps"][0]["flow"] == {"kind": "delay", "outcome": "cancelled"}
