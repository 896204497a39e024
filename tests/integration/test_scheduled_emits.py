"""Scheduled emits (``$emit(event, {delivery_ts})``), on both dialects: the event waits in
its source's ``$in`` channel (listed and deletable there, not in the event list) and is
emitted on its own channel at ``delivery_ts``; one deleted from ``$in`` first is never
emitted. The source is shaped like Pipedream's scheduled-tasks source (it subscribes to its
own ``self`` channel, dedupes on the task's id, and emits the task when it comes back). A
fake clock moves time; the job worker is drained by hand."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from sluice.clock import FakeClock, SystemClock
from sluice.platform import Platform
from tests.conftest import Api, account_client

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: every job counted

TASKS = """
export default {
  name: "Scheduled Tasks", version: "0.0.1", dedupe: "unique",
  props: { db: "$.service.db" },
  async run(event) {
    if (event.$channel === "self") {
      const { $channel, $id, ...task } = event;
      this.$emit(task, { id: $id, summary: "due" });
      return;
    }
    this.$emit({ ...event.task, $channel: "self", $id: event.id },
               { name: "self", id: event.id, delivery_ts: event.at });
  },
};
"""


@dataclasses.dataclass
class Env:
    api: Api
    clock: FakeClock
    platform: Platform


@pytest_asyncio.fixture(loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    clock = FakeClock(SystemClock().now_ms())
    async with (
        Platform.open(platform.settings, clock=clock, background=False) as opened,
        account_client(opened, "scheduler") as api,
    ):
        yield Env(api, clock, opened)


async def events(env: Env, source_id: str, channel: str | None = None) -> list[dict[str, Any]]:
    params: dict[str, str] = {"expand": "event"}
    if channel is not None:
        params["event_name"] = channel
    page = await env.api.client.get(f"/v1/sources/{source_id}/event_summaries", params=params)
    assert page.status_code == 200, page.text
    data: list[dict[str, Any]] = page.json()["data"]
    return data


async def test_a_scheduled_emit_waits_in_in_until_its_time(env: Env) -> None:
    client = env.api.client
    made = await client.post("/v1/sources", json={"component_code": TASKS})
    assert made.status_code == 200, made.text
    source_id = made.json()["data"]["id"]
    linked = await client.post(
        "/v1/subscriptions",
        params={"emitter_id": source_id, "listener_id": source_id, "event_name": "self"},
    )
    assert linked.status_code == 200, linked.text
    now = env.clock.now_ms()
    for task_id, at in (("t1", now + 60_000), ("t2", now + 60_000)):
        ran = await client.post(
            f"/v1/sources/{source_id}/run",
            json={"event": {"id": task_id, "at": at, "task": {"name": task_id}}},
        )
        assert ran.json()["data"]["ok"], ran.text
    queued = await events(env, source_id, "$in")
    assert [e["metadata"]["id"] for e in queued] == ["t2", "t1"], queued
    assert queued[0]["metadata"]["delivery_ts"] == now + 60_000
    assert await events(env, source_id) == []  # not emitted yet, nor listed
    assert await env.platform.jobs.drain() == 0  # nothing of them is due yet
    assert len(await events(env, source_id, "$in")) == 2
    assert await events(env, source_id) == []
    # Cancelled as Pipedream's source does: deleted from $in by its id.
    t2 = queued[0]["id"]
    deleted = await client.delete(
        f"/v1/sources/{source_id}/events",
        params={"start_id": t2, "end_id": t2, "event_name": "$in"},
    )
    assert deleted.status_code == 202, deleted.text

    env.clock.advance(seconds=60)
    # t1 is released on "self", the source hears it and emits the task (t2's job: nothing).
    await env.platform.jobs.drain()
    assert await events(env, source_id, "$in") == []
    delivered = await events(env, source_id, "self")
    assert [e["event"] for e in delivered] == [{"name": "t1", "$channel": "self", "$id": "t1"}]
    assert "delivery_ts" not in delivered[0]["metadata"]
    emitted = await events(env, source_id, "")
    assert [e["event"] for e in emitted] == [{"name": "t1"}], emitted
