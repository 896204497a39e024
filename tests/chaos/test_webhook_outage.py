"""Chaos (issue 30): a webhook's receiver down for an hour, far past the old backoff (5
attempts, ~15 s, after which 20 of 25 events were never delivered), then back with its first
answers lost.

A real platform (SQLite and PostgreSQL, the Node runner), a real receiver on 127.0.0.1 whose port is closed
(connections refused) and opened again, and a fake clock moved through the hour: no waiting.
Afterwards every event was delivered, none twice except those whose answer was lost (each at
most once more), and every request carried its delivery's ``Idempotency-Key``, the same in
every attempt, so the receiver can drop the doubles.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sluice.clock import FakeClock
from sluice.platform import Platform
from tests.conftest import (
    SKIP_PG,
    _create_pg_database,
    _drop_pg_database,
    account_client,
    make_settings,
)
from tests.webhook_target import Target

BURST = """
export default { name: "Burst", version: "1",
  async run(event) { for (let n = 0; n < event.count; n++) this.$emit({ n }, { summary: `${n}` }); } };
"""
EVENTS = 25
HOUR_S = 3600


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
async def test_a_receiver_down_for_an_hour_gets_every_event_when_back(
    tmp_path: Path, dialect: str
) -> None:
    database_url = ""
    if dialect == "postgresql":
        if SKIP_PG:
            pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
        database_url = await _create_pg_database()
    try:
        await _outage(tmp_path, database_url)
    finally:
        if database_url:
            await _drop_pg_database(database_url)


async def _outage(tmp_path: Path, database_url: str) -> None:
    clock = FakeClock()
    settings = make_settings(tmp_path, egress_allow="127.0.0.1:*", database_url=database_url)
    async with (
        Platform.open(settings, clock=clock, background=False) as platform,
        account_client(platform, "outage") as api,
        Target() as target,
    ):
        platform.deliveries.draw = random.Random(30).random  # the jitter, repeatable
        hook = (await api.client.post("/v1/webhooks", params={"url": target.url})).json()["data"]
        made = await api.client.post("/v1/sources", json={"component_code": BURST})
        source = made.json()["data"]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        deliveries = f"/v1/webhooks/{hook['id']}/deliveries"

        await target.down()
        ran = await api.client.post(
            f"/v1/sources/{source['id']}/run", json={"event": {"count": EVENTS}}
        )
        assert len(ran.json()["data"]["emitted"]) == EVENTS

        # Down for an hour: every attempt refused, and none given up.
        start, attempts = clock.now_ms(), 0
        while clock.now_ms() - start < HOUR_S * 1000:
            attempts += await platform.deliveries.drain()
            clock.advance(seconds=5)
        assert target.received == []
        pending = (await api.client.get(deliveries, params={"status": "pending"})).json()["data"]
        assert len(pending) == EVENTS
        assert (await api.client.get(deliveries, params={"status": "dead"})).json()["data"] == []
        # Each tried far more than the old 5 times, with the connection's error kept.
        assert min(d["attempts"] for d in pending) > 5 and attempts > 5 * EVENTS
        assert all("ConnectError" in d["last_error"] for d in pending)

        # Back, but the first 5 requests it reads are hung up on: the sender cannot know
        # they arrived, and sends them again.
        await target.up()
        target.hang_ups = 5
        back = clock.now_ms()
        while (await platform.webhooks.counts(api.account_id)).get((hook["id"], "pending")):
            # Within one ceiling (15 minutes) of its return, twice for the hung-up ones.
            assert clock.now_ms() - back <= 31 * 60 * 1000, "not delivered within the cap"
            await platform.deliveries.drain()
            clock.advance(seconds=10)

        by_key = target.by_key()
        assert len(by_key) == EVENTS and all(key.startswith("dlv_") for key in by_key)
        for key, requests in by_key.items():
            assert len(requests) <= 2, f"{key} delivered {len(requests)} times"
            assert len({r.json()["n"] for r in requests}) == 1  # one key, one event
            assert all(r.headers["x-sluice-delivery-id"] == key for r in requests)
        assert sorted(r[0].json()["n"] for r in by_key.values()) == list(range(EVENTS))
        assert sum(len(r) == 2 for r in by_key.values()) == 5  # the hung-up ones only
        delivered = (await api.client.get(deliveries, params={"status": "delivered"})).json()
        assert {d["id"] for d in delivered["data"]} == set(by_key)
        assert (await api.client.get(deliveries, params={"status": "pending"})).json()["data"] == []
