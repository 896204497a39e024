"""Timer sources on both dialects: a tick is one run with {timestamp, interval_seconds}, a
downtime fires once, two schedulers on one database never fire a tick twice, and a deleted or
inactive source has no timer. A fake clock moves time; the scheduler and the job worker are
driven step by step, limited to this test's deployments (the database is shared)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.clock import FakeClock, SystemClock
from sluice.domain.jobs import Ticked, TimerJob
from sluice.domain.states import JobKind, JobState
from sluice.engine.queue.jobs import JobWorker
from sluice.engine.queue.scheduler import Scheduler, SchedulerConfig
from sluice.platform import Platform
from sluice.storage import timers
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_sources_api import deploy

pytestmark = pytest.mark.usefixtures("empty_queue")  # every due timer and job is this test's

TICKER = """
export default {
  name: "Ticker",
  version: "0.0.1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } } },
  async run(event) { this.$emit(event); },
};
"""


@dataclass
class Rig:
    """A fake clock, a job worker running ticks, and schedulers for these deployments."""

    platform: Platform
    clock: FakeClock
    worker: JobWorker
    ids: list[str]

    def scheduler(self, batch: int = 200) -> Scheduler:
        return Scheduler(
            self.platform.db,
            self.clock,
            SchedulerConfig(batch=batch),
            notify=self.worker.notify,
        )

    async def timer(self, deployment_id: str) -> timers.Timer | None:
        async with self.platform.db.connect() as conn:
            return await timers.get(conn, deployment_id)

    async def next_run_ms(self, deployment_id: str) -> int:
        timer = await self.timer(deployment_id)
        assert timer is not None
        return timer.next_run_ms


@pytest.fixture
def rig(platform: Platform) -> Rig:
    # Deploys stamp timers with the platform's real clock: start the fake one there.
    clock = FakeClock(SystemClock().now_ms())
    handlers = {JobKind.TIMER: platform.jobs.handlers[JobKind.TIMER]}
    return Rig(platform, clock, JobWorker(platform.db, clock, handlers=handlers), [])


async def deploy_ticker(api: Api, rig: Rig, **body: Any) -> dict[str, Any]:
    source = await deploy(api, TICKER, **body)
    rig.ids.append(source["id"])
    return source


async def events_of(api: Api, source_id: str) -> list[Any]:
    page = (
        await api.client.get(f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"})
    ).json()
    return [e["event"] for e in reversed(page["data"])]  # oldest first


async def timer_jobs(platform: Platform, ids: list[str]) -> int:
    async with platform.db.connect() as conn:
        count = await conn.scalar(
            sa.select(sa.func.count()).where(
                jobs_table.c.kind == "timer", jobs_table.c.target_id.in_(ids)
            )
        )
    return int(count or 0)


async def test_each_tick_is_one_run_with_the_timer_event(api: Api, rig: Rig) -> None:
    before = rig.clock.now_ms()
    source = await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
    first = await rig.next_run_ms(source["id"])
    assert first % 1000 == 0 and before + 14_000 < first <= SystemClock().now_ms() + 15_000
    scheduler = rig.scheduler()

    rig.clock.set(first - 1)
    assert await scheduler.tick() == 0
    rig.clock.set(first)
    assert await scheduler.tick() == 1
    assert await scheduler.tick() == 0  # the tick moved on: not again
    assert await rig.worker.drain() == 1
    rig.clock.advance(seconds=15)
    assert await scheduler.tick() == 1 and await rig.worker.drain() == 1

    assert await events_of(api, source["id"]) == [
        {"timestamp": first // 1000, "interval_seconds": 15},
        {"timestamp": first // 1000 + 15, "interval_seconds": 15},
    ]
    timer = await rig.timer(source["id"])
    assert timer is not None and timer.last_run_ms == first + 15_000
    assert timer.next_run_ms == first + 30_000


async def test_after_downtime_a_missed_tick_fires_once(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
    first = await rig.next_run_ms(source["id"])
    scheduler = rig.scheduler()
    rig.clock.set(first + 10 * 15_000 + 4_000)  # down for ten intervals
    assert await scheduler.tick() == 1
    assert await scheduler.tick() == 0
    assert await rig.worker.drain() == 1
    assert [e["timestamp"] for e in await events_of(api, source["id"])] == [first // 1000]
    # Back on the deploy-time grid: the next tick is the first one after now.
    assert await rig.next_run_ms(source["id"]) == first + 11 * 15_000
    rig.clock.set(first + 11 * 15_000 - 1)
    assert await scheduler.tick() == 0
    rig.clock.advance(ms=1)
    assert await scheduler.tick() == 1 and await rig.worker.drain() == 1
    assert len(await events_of(api, source["id"])) == 2


async def test_a_cron_timer_in_a_timezone(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(
        api,
        rig,
        configured_props={"timer": {"cron": "*/5 * * * *", "timezone": "Europe/Paris"}},
    )
    assert source["configured_props"]["timer"] == {
        "cron": "*/5 * * * *",
        "interval_seconds": None,
        "timezone": "Europe/Paris",
    }
    first = await rig.next_run_ms(source["id"])
    assert first % 300_000 == 0
    scheduler = rig.scheduler()
    rig.clock.set(first)
    assert await scheduler.tick() == 1 and await rig.worker.drain() == 1
    (event,) = await events_of(api, source["id"])
    assert event["timestamp"] == first // 1000 and event["interval_seconds"] is None
    assert event["cron"] == "*/5 * * * *"
    assert event["timezone_configured"]["timezone"] == "Europe/Paris"
    assert await rig.next_run_ms(source["id"]) == first + 300_000


async def test_two_schedulers_never_fire_the_same_tick_twice(api: Api, rig: Rig) -> None:
    sources = [
        await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
        for _ in range(6)
    ]
    latest = max([await rig.next_run_ms(s["id"]) for s in sources])
    # Two "processes": their own schedulers, small batches so their claims interleave.
    one, two = rig.scheduler(batch=2), rig.scheduler(batch=2)
    rig.clock.set(latest)
    for _ in range(4):
        fired = await asyncio.gather(one.tick(), two.tick())
        assert sum(fired) == len(sources)
        rig.clock.advance(seconds=15)
    assert await timer_jobs(rig.platform, rig.ids) == 4 * len(sources)
    assert await rig.worker.drain() == 4 * len(sources)
    for source in sources:
        stamps = [e["timestamp"] for e in await events_of(api, source["id"])]
        assert len(stamps) == 4 and len(set(stamps)) == 4, stamps


async def test_concurrent_claims_take_disjoint_timers(api: Api, rig: Rig) -> None:
    sources = [
        await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
        for _ in range(8)
    ]
    latest = max([await rig.next_run_ms(s["id"]) for s in sources])
    postgres = rig.platform.db.dialect.name == "postgresql"
    # On PostgreSQL all four transactions stay open until each has claimed: the rows one
    # holds are skipped by the others (SKIP LOCKED), not waited for. SQLite has one writer.
    barrier = asyncio.Barrier(4)

    async def claim() -> list[str]:
        async with rig.platform.db.begin() as conn:
            ticks = await timers.claim_due(conn, now_ms=latest, limit=3)
            if postgres:
                await asyncio.wait_for(barrier.wait(), 10)
        return [t.deployment_id for t in ticks]

    batches = await asyncio.gather(*(claim() for _ in range(4)))
    claimed = [d for batch in batches for d in batch]
    assert sorted(claimed) == sorted(rig.ids)
    if postgres:
        assert sorted(len(b) for b in batches) == [0, 2, 3, 3]
    assert await timer_jobs(rig.platform, rig.ids) == len(sources)
    rig.scheduler()  # registers the timer handler on the worker
    rig.clock.set(latest)
    assert await rig.worker.drain() == len(sources)


async def test_deleting_the_source_stops_its_timer(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
    first = await rig.next_run_ms(source["id"])
    scheduler = rig.scheduler()
    rig.clock.set(first)
    assert await scheduler.tick() == 1  # enqueued, then the source goes
    assert (await api.client.delete(f"/v1/sources/{source['id']}")).status_code == 200
    assert await rig.timer(source["id"]) is None
    assert await rig.worker.drain() == 1  # the pending tick is skipped, and done
    rig.clock.advance(seconds=60)
    assert await scheduler.tick() == 0


async def test_an_inactive_source_has_no_timer(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(api, rig, active=False)
    assert source["active"] is False
    assert await rig.timer(source["id"]) is None
    active = await deploy_ticker(api, rig)  # the prop's default: every 60 s
    timer = await rig.timer(active["id"])
    assert timer is not None and timer.schedule.interval_seconds == 60


async def test_schedules_are_checked_at_deploy(api: Api) -> None:
    for timer, field in [
        ({"intervalSeconds": 5}, "configured_props.timer.intervalSeconds"),
        ({"cron": "*/5 * * *"}, "configured_props.timer.cron"),
        ({"cron": "0 9 * * *", "timezone": "Europe/Atlantis"}, "configured_props.timer.timezone"),
    ]:
        response = await api.client.post(
            "/v1/sources", json={"component_code": TICKER, "configured_props": {"timer": timer}}
        )
        body = assert_error(response, 400, "invalid_props")
        assert body.get("field") == field, body


async def test_sync_keeps_the_phase_unless_the_schedule_changes(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
    first = await rig.next_run_ms(source["id"])

    async def sync(schedule: dict[str, Any] | None, active: bool = True) -> None:
        async with rig.platform.db.begin() as conn:
            await timers.sync(
                conn,
                deployment_id=source["id"],
                owner_id=api.account_id,
                ticked=Ticked.SOURCE,
                schedule=schedule,
                active=active,
                now_ms=first + 7_500,
            )

    await sync({"intervalSeconds": 15, "cron": None})  # e.g. an update of other props
    assert await rig.next_run_ms(source["id"]) == first
    await sync({"intervalSeconds": 60, "cron": None})
    assert await rig.next_run_ms(source["id"]) == first + 7_000 + 60_000
    await sync({"intervalSeconds": None, "cron": "0 * * * *", "timezone": "Asia/Kolkata"})
    timer = await rig.timer(source["id"])
    assert timer is not None and timer.schedule.timezone == "Asia/Kolkata"
    assert timer.next_run_ms % 3_600_000 == 1_800_000  # India is UTC+05:30
    await sync({"intervalSeconds": 15, "cron": None}, active=False)  # deactivated
    assert await rig.timer(source["id"]) is None
    await sync({"intervalSeconds": 15, "cron": None})  # activated again: a new phase
    assert await rig.next_run_ms(source["id"]) == first + 7_000 + 15_000


async def test_a_tick_says_what_it_ticks_for_and_old_ticks_still_run(api: Api, rig: Rig) -> None:
    source = await deploy_ticker(api, rig, configured_props={"timer": {"intervalSeconds": 15}})
    created = await api.client.post(
        "/v1/workflows",
        json={
            "name": "ticks",
            "trigger": {"type": "timer", "intervalSeconds": 15},
            "steps": [
                {
                    "name": "tick",
                    "code": "export default defineComponent({ async run({ steps }) "
                    "{ return steps.trigger.event; } });",
                }
            ],
        },
    )
    assert created.status_code == 200, created.text
    workflow = created.json()["data"]
    rig.ids.append(workflow["id"])
    source_timer, workflow_timer = await rig.timer(source["id"]), await rig.timer(workflow["id"])
    assert source_timer is not None and source_timer.ticked is Ticked.SOURCE
    assert workflow_timer is not None and workflow_timer.ticked is Ticked.WORKFLOW

    # A tick the scheduler enqueues carries its kind.
    rig.clock.set(max(source_timer.next_run_ms, workflow_timer.next_run_ms))
    assert await rig.scheduler().tick() == 2
    async with rig.platform.db.connect() as conn:
        payloads = {
            row.target_id: row.payload
            for row in await conn.execute(
                sa.select(jobs_table.c.target_id, jobs_table.c.payload).where(
                    jobs_table.c.kind == "timer"
                )
            )
        }
    assert TimerJob.of(payloads[source["id"]], "").ticked is Ticked.SOURCE
    assert TimerJob.of(payloads[workflow["id"]], "").ticked is Ticked.WORKFLOW
    assert await rig.worker.drain() == 2

    # A tick queued by an earlier version (its payload the bare event) runs the same.
    now_ms = rig.clock.now_ms()
    async with rig.platform.db.begin() as conn:
        await conn.execute(
            jobs_table.insert(),
            [
                {
                    "kind": JobKind.TIMER,
                    "owner_id": api.account_id,
                    "target_id": target,
                    "payload": {"timestamp": 42, "interval_seconds": 15},
                    "status": JobState.QUEUED,
                    "attempts": 0,
                    "run_after_ms": now_ms,
                    "created_ms": now_ms,
                }
                for target in (source["id"], workflow["id"])
            ],
        )
    assert await rig.worker.drain() == 2
    events = await events_of(api, source["id"])
    assert [e["timestamp"] for e in events] == [source_timer.next_run_ms // 1000, 42]
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"]["timestamp"] for r in runs] == [
        42,
        workflow_timer.next_run_ms // 1000,
    ]
    assert {r["context"]["source_type"] for r in runs} == {"TIMER"}
