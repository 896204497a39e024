"""Webhooks (``wh_…``), as Pipedream's, on both dialects: created with query parameters,
subscribed to an emitter, each event POSTed as JSON to the URL under the egress rules with an
``Idempotency-Key`` (a refused or failing URL leaves the delivery pending, tried again later;
dead after its retries, listed and retried through the API), deleted with their
subscriptions and deliveries, invisible to other accounts."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.clock import FakeClock
from sluice.domain import egress
from sluice.domain.deliveries import RetryPolicy
from sluice.engine.outbound.deliveries import DeliveryConfig, DeliveryWorker
from sluice.platform import Platform
from sluice.storage.tables import jobs
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_workflow_triggers import Gate
from tests.webhook_target import Target

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: every job counted

EMITTER = """
export default { name: "Hooked", version: "1",
  async run(event) { this.$emit({ n: event.n }, { summary: "n" }); } };
"""


@pytest.fixture
def loopback_webhooks(platform: Platform) -> Any:
    """Deliveries may reach the test's loopback Gate (the egress policy refuses loopback)."""
    before = platform.webhooks.egress
    platform.webhooks.egress = egress.EgressPolicy.parse("127.0.0.1:*")
    yield
    platform.webhooks.egress = before


async def test_events_are_posted_to_a_subscribed_webhook(
    api: Api, other_api: Api, loopback_webhooks: Any
) -> None:
    async with Gate() as gate:
        made = await api.client.post(
            "/v1/webhooks", params={"url": f"{gate.url}/in", "name": "collector"}
        )
        assert made.status_code == 200, made.text
        hook = made.json()["data"]
        assert hook["id"].startswith("wh_") and hook["user_id"] == api.account_id
        assert (hook["name"], hook["url"], hook["active"]) == ("collector", f"{gate.url}/in", True)
        source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()[
            "data"
        ]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        # Another account can neither subscribe it nor see it.
        other = await other_api.client.post("/v1/subscriptions", params=link)
        assert other.status_code == 404
        assert (await other_api.client.get("/v1/users/me/webhooks")).json()["data"] == []

        await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 7}})
        assert await api.platform.deliveries.drain() == 1
        [(method, path, body)] = gate.requests
        assert (method, path, json.loads(body)) == ("POST", "/in", {"n": 7})
        headers = gate.headers[0]
        assert headers["content-type"] == "application/json"
        assert headers["x-sluice-emitter-id"] == source["id"]
        # The delivery's id: the receiver's key to drop a double.
        assert headers["idempotency-key"].startswith("dlv_")
        assert headers["x-sluice-delivery-id"] == headers["idempotency-key"]
        assert headers["x-sluice-delivery-attempt"] == "1"
        listed = await api.client.get(f"/v1/webhooks/{hook['id']}/deliveries")
        [delivery] = listed.json()["data"]
        assert delivery["id"] == headers["idempotency-key"]
        assert (delivery["status"], delivery["attempts"], delivery["last_status"]) == (
            "delivered",
            1,
            200,
        )
        assert delivery["event_id"] == headers["x-sluice-event-id"]
        # Not the job queue: a webhook's deliveries take no job (the queue is this test's).
        async with api.platform.db.connect() as conn:
            assert await conn.scalar(sa.select(sa.func.count()).select_from(jobs)) == 0

        listed = (await api.client.get("/v1/users/me/webhooks")).json()
        assert [h["id"] for h in listed["data"]] == [hook["id"]]
        assert "user_id" not in listed["data"][0] and listed["page_info"]["total_count"] == 1
        assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200
        subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
        assert [s for s in subs if s["listener_id"] == hook["id"]] == []
        assert_error(await api.client.delete(f"/v1/webhooks/{hook['id']}"), 404, "not_found")


async def test_bad_urls_are_400s_and_a_refused_url_leaves_its_delivery_pending(
    api: Api,
) -> None:
    for url in ("ftp://example.com/x", "not a url", "http://"):
        body = assert_error(
            await api.client.post("/v1/webhooks", params={"url": url}), 400, "invalid_request"
        )
        assert body["field"] == "url"
    # Loopback: accepted (the policy may change), refused at delivery, kept to retry.
    hook = (await api.client.post("/v1/webhooks", params={"url": "http://127.0.0.1:9/x"})).json()[
        "data"
    ]
    source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()["data"]
    link = {"emitter_id": source["id"], "listener_id": hook["id"]}
    assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
    await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 1}})
    # A fake clock and a fixed draw: the retry is due 500 ms on, never within this drain (on
    # the real clock a draw near 0 made it due at once, and the drain made 2 attempts).
    worker = DeliveryWorker(
        api.platform.db,
        FakeClock(api.platform.clock.now_ms()),
        api.platform.webhooks,
        draw=lambda: 0.5,
    )
    assert await worker.drain() == 1
    listed = await api.client.get(
        f"/v1/webhooks/{hook['id']}/deliveries", params={"status": "pending"}
    )
    [delivery] = listed.json()["data"]
    assert delivery["attempts"] == 1 and "refused" in delivery["last_error"]
    assert delivery["next_attempt_at"] is not None and delivery["finished_at"] is None
    assert_error(
        await api.client.get(f"/v1/webhooks/{hook['id']}/deliveries", params={"status": "x"}),
        400,
        "invalid_request",
    )
    # Deleting the webhook deletes its deliveries (none left for other tests' workers).
    assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200
    assert_error(await api.client.get(f"/v1/webhooks/{hook['id']}/deliveries"), 404, "not_found")


async def test_dead_deliveries_are_listed_and_retried_with_the_same_key(
    api: Api, other_api: Api, loopback_webhooks: Any
) -> None:
    """Past its retries a delivery is dead, listed as such; a retry (one, or all of the
    webhook's) delivers it with the key every earlier attempt had."""
    # Retries used up after 2 attempts, the second due at once (no waiting in a test).
    worker = DeliveryWorker(
        api.platform.db,
        api.platform.clock,
        api.platform.webhooks,
        DeliveryConfig(policy=RetryPolicy(first_ms=0, max_attempts=2)),
    )
    async with Target() as target:
        target.status = 503
        hook = (await api.client.post("/v1/webhooks", params={"url": target.url})).json()["data"]
        source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()[
            "data"
        ]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        for n in (1, 2):
            await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
        assert await worker.drain() == 4  # 2 deliveries, 2 attempts each
        path = f"/v1/webhooks/{hook['id']}/deliveries"
        dead = (await api.client.get(path, params={"status": "dead"})).json()["data"]
        assert len(dead) == 2
        assert {(d["attempts"], d["last_status"]) for d in dead} == {(2, 503)}
        assert all(d["finished_at"] and d["last_error"] == "the URL answered 503" for d in dead)
        assert (await api.client.get(path, params={"status": "pending"})).json()["data"] == []
        # /metrics counts them (all accounts together) and the attempts' outcomes.
        text = (await api.client.get("/metrics", headers={"Authorization": ""})).text
        dead_gauge = re.search(r'^sluice_webhook_deliveries\{state="dead"\} (\S+)$', text, re.M)
        assert dead_gauge and float(dead_gauge.group(1)) >= 2
        assert 'sluice_webhook_delivery_attempts_total{outcome="dead"}' in text
        assert 'sluice_webhook_delivery_attempts_total{outcome="failed"}' in text
        # Another account sees none of it and retries nothing.
        assert_error(await other_api.client.get(path), 404, "not_found")
        assert_error(await other_api.client.post(f"{path}/retry"), 404, "not_found")
        first, second = dead
        # Retrying one that is not dead, or not the webhook's: refused, nothing retried.
        assert_error(await api.client.post(f"{path}/dlv_nothere/retry"), 404, "not_found")

        target.status = 200
        one = await api.client.post(f"{path}/{first['id']}/retry")
        assert one.status_code == 200 and one.json()["data"]["retried"] == [first["id"]]
        assert_error(await api.client.post(f"{path}/{first['id']}/retry"), 409, "conflict")
        assert await api.platform.deliveries.drain() == 1
        rest = (await api.client.post(f"{path}/retry")).json()["data"]
        assert rest == {"retried": [second["id"]], "count": 1}
        assert await api.platform.deliveries.drain() == 1

        delivered = (await api.client.get(path, params={"status": "delivered"})).json()["data"]
        assert {d["id"] for d in delivered} == {first["id"], second["id"]}
        assert all(d["attempts"] == 1 and d["last_error"] is None for d in delivered)
        by_key = target.by_key()
        assert set(by_key) == {first["id"], second["id"]}
        assert [len(v) for v in by_key.values()] == [3, 3]  # 2 failed, then the retry
        assert {r.json()["n"] for r in target.received} == {1, 2}
        assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200
    await worker.stop()


async def test_a_slow_webhook_holds_only_its_own_delivery_slots(
    api: Api, loopback_webhooks: Any
) -> None:
    """A URL that does not answer holds at most its webhook's slots: another webhook of the
    account gets every event meanwhile, and the account's runs go on (deliveries are not
    jobs)."""
    worker = DeliveryWorker(
        api.platform.db,
        api.platform.clock,
        api.platform.webhooks,
        DeliveryConfig(concurrency=8, per_webhook=2, poll_seconds=0.05),
    )
    async with Gate(hold=1000) as slow, Target() as fast:
        hooks = []
        for url in (f"{slow.url}/in", fast.url):
            hooks.append(
                (await api.client.post("/v1/webhooks", params={"url": url})).json()["data"]
            )
        source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()[
            "data"
        ]
        for hook in hooks:
            link = {"emitter_id": source["id"], "listener_id": hook["id"]}
            assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        await worker.start()
        try:
            for n in range(6):
                await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
            worker.notify()
            async with asyncio.timeout(30):
                await fast.wait_for(6)  # all of the other webhook's, while the slow one hangs
            assert len(slow.requests) == 2  # its 2 slots, no more
            # The account's source still runs at once (its job slots are its own).
            again = await api.client.post(
                f"/v1/sources/{source['id']}/run", json={"event": {"n": 6}}
            )
            assert again.status_code == 200
            async with asyncio.timeout(30):
                await fast.wait_for(7)
            slow.release()
            async with asyncio.timeout(30):
                while len(slow.requests) < 7:
                    slow.arrived.clear()
                    await slow.arrived.wait()
        finally:
            await worker.stop(grace_seconds=5)
        assert sorted(json.loads(body)["n"] for _, _, body in slow.requests) == list(range(7))
        for hook in hooks:
            assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200


async def test_a_failed_attempt_is_one_warning_without_a_stack(
    api: Api, loopback_webhooks: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with Target() as target:
        target.status = 500
        hook = (await api.client.post("/v1/webhooks", params={"url": target.url})).json()["data"]
        source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()[
            "data"
        ]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 1}})
        caplog.clear()
        with caplog.at_level(logging.INFO):
            # One pass, not drain(): the retry is due a second later on the real clock, and a
            # loaded machine took that long over the first attempt (a -n 2 run saw a second).
            assert await api.platform.deliveries.run_once() == 1
        [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert record.__dict__["action"] == "delivery_failed"
        assert record.__dict__["webhook_id"] == hook["id"]
        assert record.__dict__["http_status"] == 500 and record.__dict__["retry_at_ms"]
        assert "answered 500" in record.getMessage()
        assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200


async def test_stopping_makes_the_deliveries_in_hand_due_again_at_once(
    api: Api, loopback_webhooks: Any
) -> None:
    """SIGTERM's stop: the attempts under way are cut off and the claimed ones not started are
    left; all are due again now, their attempts not counted, for the next worker."""
    worker = DeliveryWorker(
        api.platform.db,
        api.platform.clock,
        api.platform.webhooks,
        DeliveryConfig(concurrency=8, per_webhook=2, poll_seconds=0.05),
    )
    async with Gate(hold=1000) as slow:
        hook = (await api.client.post("/v1/webhooks", params={"url": f"{slow.url}/in"})).json()[
            "data"
        ]
        source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()[
            "data"
        ]
        link = {"emitter_id": source["id"], "listener_id": hook["id"]}
        assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
        for n in range(3):
            await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
        await worker.start()
        worker.notify()
        async with asyncio.timeout(30):
            while len(slow.requests) < 2:  # its 2 slots busy, the third claimed and waiting
                slow.arrived.clear()
                await slow.arrived.wait()
        await worker.stop(grace_seconds=0)
        path = f"/v1/webhooks/{hook['id']}/deliveries"
        pending = (await api.client.get(path, params={"status": "pending"})).json()["data"]
        assert len(pending) == 3 and {d["attempts"] for d in pending} == {0}
        now_s = api.platform.clock.now_ms() // 1000
        assert all(d["next_attempt_at"] <= now_s for d in pending)
        # The next worker takes them at once (the receiver answers now).
        slow.release()
        assert await api.platform.deliveries.drain() == 3
        delivered = (await api.client.get(path, params={"status": "delivered"})).json()["data"]
        assert len(delivered) == 3
        assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200
