"""Webhooks (``wh_…``), as Pipedream's, on both dialects: created with query parameters,
subscribed to an emitter, each event POSTed as JSON to the URL under the egress rules (a
refused or failing URL fails the delivery job, which runs again later), deleted with their
subscriptions, invisible to other accounts."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.domain import egress
from sluice.platform import Platform
from sluice.storage import jobs
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_workflow_triggers import Gate

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
        await api.platform.jobs.drain()
        [(method, path, body)] = gate.requests
        assert (method, path, json.loads(body)) == ("POST", "/in", {"n": 7})
        headers = gate.headers[0]
        assert headers["content-type"] == "application/json"
        assert headers["x-sluice-emitter-id"] == source["id"]

        listed = (await api.client.get("/v1/users/me/webhooks")).json()
        assert [h["id"] for h in listed["data"]] == [hook["id"]]
        assert "user_id" not in listed["data"][0] and listed["page_info"]["total_count"] == 1
        assert (await api.client.delete(f"/v1/webhooks/{hook['id']}")).status_code == 200
        subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
        assert [s for s in subs if s["listener_id"] == hook["id"]] == []
        assert_error(await api.client.delete(f"/v1/webhooks/{hook['id']}"), 404, "not_found")


async def test_bad_urls_are_400s_and_a_refused_url_fails_its_delivery(api: Api) -> None:
    for url in ("ftp://example.com/x", "not a url", "http://"):
        body = assert_error(
            await api.client.post("/v1/webhooks", params={"url": url}), 400, "invalid_request"
        )
        assert body["field"] == "url"
    # Loopback: accepted (the policy may change), refused at delivery, the job kept to retry.
    hook = (await api.client.post("/v1/webhooks", params={"url": "http://127.0.0.1:9/x"})).json()[
        "data"
    ]
    source = (await api.client.post("/v1/sources", json={"component_code": EMITTER})).json()["data"]
    link = {"emitter_id": source["id"], "listener_id": hook["id"]}
    assert (await api.client.post("/v1/subscriptions", params=link)).status_code == 200
    await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 1}})
    await api.platform.jobs.drain()
    async with api.platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(jobs_table.c.status, jobs_table.c.last_error).where(
                    jobs_table.c.target_id == hook["id"]
                )
            )
        ).one()
    assert row.status == "queued" and "refused" in row.last_error and hook["id"] in row.last_error
    # Not left for other tests' workers on the shared platform to run when their clock moves.
    async with api.platform.db.begin() as conn:
        await jobs.delete_for(conn, hook["id"])
