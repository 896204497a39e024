"""Runs a client waits for (``engine/runs/client_runs.py``): no job before the run, the run stored
before the answer; a job stored (held) at an immediate ``$.respond``; a crashed run queued to
run again; and the group commit that stores them (``database.GroupWriter``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.domain.states import JobKind
from sluice.platform import Platform
from sluice.storage import database
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_workflow_triggers import RESPONDS, Gate, hit
from tests.integration.test_workflow_triggers import loopback_egress as loopback_egress
from tests.integration.test_workflows import create, step

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: drains run its jobs


async def _jobs(platform: Platform, workflow: dict[str, Any]) -> list[Any]:
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table).where(
                jobs_table.c.kind == JobKind.WORKFLOW, jobs_table.c.target_id == workflow["id"]
            )
        )
        return list(rows)


async def _answers_early(api: Api, gate: Gate) -> dict[str, Any]:
    """A workflow answering 202 at once (``immediate``), then waiting on ``gate``."""
    return await create(
        api,
        [
            step(
                "early",
                "async run({ $ }) { await $.respond({ status: 202, body: 'ok', "
                "immediate: true }); }",
            ),
            step("slow", f"async run() {{ return (await fetch('{gate.url}/s')).status; }}"),
        ],
        trigger={"type": "http"},
    )


async def test_a_custom_response_is_answered_after_its_run_is_stored_without_a_job(
    api: Api, platform: Platform
) -> None:
    workflow = await create(api, [RESPONDS], trigger={"type": "http"})
    response = await hit(api, workflow, json={"a": 1})
    assert response.status_code == 201, response.text
    # Stored by the time the client has its answer (no drain, no wait), and no job was.
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1 and runs[0]["response"]["status"] == 201
    assert await _jobs(platform, workflow) == []


async def test_a_manual_run_is_stored_without_a_job(api: Api, platform: Platform) -> None:
    workflow = await create(api, [step("one", "async run() { return 1; }")])
    response = await api.client.post(f"/v1/workflows/{workflow['id']}/runs", json={"event": {}})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["status"] == "success" and data["steps"][0]["return_value"] == 1
    stored = await api.client.get(f"/v1/runs/{data['id']}")
    assert stored.status_code == 200 and stored.json()["data"] == data
    assert await _jobs(platform, workflow) == []


async def test_an_immediate_respond_stores_a_held_job_that_the_run_marks_done(
    api: Api, platform: Platform, loopback_egress: Any
) -> None:
    async with Gate(hold=1) as gate:
        workflow = await _answers_early(api, gate)
        response = await hit(api, workflow, content=b"x")
        assert response.status_code == 202
        # Acknowledged: from here on the run is durable as a job this worker holds.
        [job] = await _jobs(platform, workflow)
        assert job.status == "running" and job.worker_id == platform.jobs.worker_id
        assert job.locked_until_ms is not None and job.payload["event"]["body"] == "x"
        await gate.arrived.wait()
        gate.release()
        await platform.ingress.idle()
    [job] = await _jobs(platform, workflow)
    assert job.status == "done"
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1 and runs[0]["steps"][1]["return_value"] == 200
    assert job.payload["run_id"] == runs[0]["id"]
    assert await platform.jobs.drain() == 0  # nothing left to run
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1  # never run again


async def test_a_run_whose_runner_dies_is_queued_to_run_again(
    api: Api, platform: Platform, loopback_egress: Any
) -> None:
    async with Gate(hold=1) as gate:
        workflow = await create(
            api,
            [
                step(
                    "wait",
                    f"async run({{ $ }}) {{ const s = (await fetch('{gate.url}/w')).status; "
                    "await $.respond({ status: 200, body: String(s) }); }",
                )
            ],
            trigger={"type": "http"},
        )
        answer = asyncio.create_task(hit(api, workflow, content=b"y"))
        await gate.arrived.wait()  # the step is running
        runner = platform.pool.runner(api.account_id)
        assert runner is not None
        runner.kill()
        response = await answer
        assert_error(response, 503, "runner_crashed")
        [job] = await _jobs(platform, workflow)
        assert job.status == "queued" and job.payload["event"]["body"] == "y"
        gate.release()
        await platform.jobs.drain()  # the worker runs it again
    [job] = await _jobs(platform, workflow)
    assert job.status == "done"
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1 and runs[0]["status"] == "success"
    assert runs[0]["id"] == job.payload["run_id"]


async def test_a_failing_transaction_fails_only_its_own_caller_in_a_group(
    platform: Platform,
) -> None:
    writer = database.Writer(platform.db)
    grouped = database.GroupWriter(writer)
    table = sa.Table("group_probe", sa.MetaData(), sa.Column("n", sa.Integer, primary_key=True))
    async with platform.db.begin() as conn:
        await conn.run_sync(lambda c: table.create(c))

    def insert(n: int) -> Any:
        def transaction(conn: Any) -> int:
            conn.execute(table.insert().values(n=n))
            return n

        return transaction

    try:
        # Four callers in one turn of the loop: one group; 2 twice breaks the primary key.
        results = await asyncio.gather(
            grouped(insert(1)), grouped(insert(2)), grouped(insert(2)), grouped(insert(3)),
            return_exceptions=True,
        )  # fmt: skip
        assert results[0] == 1 and results[1] == 2 and results[3] == 3
        assert isinstance(results[2], sa.exc.IntegrityError)
        async with platform.db.connect() as conn:
            stored = sorted(r.n for r in await conn.execute(sa.select(table)))
        assert stored == [1, 2, 3]
    finally:
        writer.dispose()
        async with platform.db.begin() as conn:
            await conn.run_sync(lambda c: table.drop(c))


async def test_an_acknowledged_run_cut_by_shutdown_is_queued_again_at_once(
    api: Api, platform: Platform, loopback_egress: Any
) -> None:
    async with Gate(hold=1) as gate:
        workflow = await _answers_early(api, gate)
        response = await hit(api, workflow, content=b"z")
        assert response.status_code == 202
        await gate.arrived.wait()
        await platform.ingress.close()  # what shutdown does with the runs for requests
        [job] = await _jobs(platform, workflow)
        assert job.status == "queued" and job.worker_id is None  # not after its lease
        gate.release()
        await platform.jobs.drain()
    [job] = await _jobs(platform, workflow)
    assert job.status == "done"
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1 and runs[0]["steps"][1]["return_value"] == 200
