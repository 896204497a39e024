"""Subscriptions between sources: POST/DELETE /v1/subscriptions, GET /v1/users/me/subscriptions,
and delivery of emits (default channel, named channels, the dc_* glob) through "emit" jobs,
driven with ``platform.jobs.drain()``."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

pytestmark = pytest.mark.usefixtures("empty_queue")  # the queue to itself: every job counted

#: Emits what the run's event lists: {"emits": [{"payload": …, "channel": "…"?}, …]}.
EMITTER = """
export default {
  name: "Emitter",
  version: "0.0.1",
  async run(event) {
    for (const e of event.emits || []) this.$emit(e.payload, { name: e.channel });
  },
};
"""

#: Emits what it heard, on its default channel.
LISTENER = """
export default {
  name: "Listener",
  version: "0.0.1",
  async run(event) { this.$emit({ heard: event }); },
};
"""

ACTION = """
export default {
  name: "An action", key: "an-action", version: "0.0.1", type: "action",
  async run({ $ }) { return 1; },
};
"""


async def deploy(api: Api, code: str, name: str) -> str:
    response = await api.client.post("/v1/sources", json={"component_code": code, "name": name})
    assert response.status_code == 200, response.text
    return str(response.json()["data"]["id"])


async def emit(api: Api, source_id: str, *emits: dict[str, Any]) -> list[str]:
    response = await api.client.post(
        f"/v1/sources/{source_id}/run", json={"event": {"emits": list(emits)}}
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["ok"], data
    return list(data["emitted"])


async def subscribe(api: Api, emitter_id: str, listener_id: str, event_name: str | None = None):
    params = {"emitter_id": emitter_id, "listener_id": listener_id}
    if event_name is not None:
        params["event_name"] = event_name
    return await api.client.post("/v1/subscriptions", params=params)


async def heard(api: Api, listener_id: str) -> list[Any]:
    """What the listener's runs received, oldest first (it re-emits each event it hears)."""
    page = (
        await api.client.get(
            f"/v1/sources/{listener_id}/event_summaries", params={"expand": "event"}
        )
    ).json()
    return [item["event"]["heard"] for item in reversed(page["data"])]


async def test_a_listener_hears_the_default_channel_only(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    response = await subscribe(api, emitter, listener)
    assert response.status_code == 200, response.text
    sub = response.json()["data"]
    assert sub["id"].startswith("sub_")
    assert sub["emitter_id"] == emitter and sub["listener_id"] == listener
    assert sub["event_name"] == "" and isinstance(sub["created_at"], int)

    await emit(api, emitter, {"payload": {"n": 1}}, {"payload": {"n": 2}, "channel": "ch1"})
    await emit(api, emitter, {"payload": "plain text"})
    assert await api.platform.jobs.drain() >= 2
    # Deliveries run concurrently: their order is not guaranteed.
    assert sorted(await heard(api, listener), key=str) == ["plain text", {"n": 1}]
    # Each delivery job is done, in the transaction that stored the listener's emit.
    async with api.platform.db.connect() as conn:
        statuses = (
            await conn.execute(
                sa.select(jobs_table.c.status).where(
                    jobs_table.c.target_id == listener, jobs_table.c.kind == "emit"
                )
            )
        ).all()
    assert [s.status for s in statuses] == ["done", "done"]


async def test_a_named_channel_reaches_only_its_subscribers(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    on_ch1 = await deploy(api, LISTENER, "on-ch1")
    on_default = await deploy(api, LISTENER, "on-default")
    assert (await subscribe(api, emitter, on_ch1, "ch1")).status_code == 200
    assert (await subscribe(api, emitter, on_default, "")).status_code == 200

    await emit(
        api,
        emitter,
        {"payload": {"to": "default"}},
        {"payload": {"to": "ch1"}, "channel": "ch1"},
        {"payload": {"to": "ch2"}, "channel": "ch2"},
    )
    await api.platform.jobs.drain()
    assert await heard(api, on_ch1) == [{"to": "ch1"}]
    assert await heard(api, on_default) == [{"to": "default"}]


async def test_the_dc_glob_hears_every_source_but_never_echoes_itself(api: Api) -> None:
    first = await deploy(api, EMITTER, "first")
    second = await deploy(api, EMITTER, "second")
    listener = await deploy(api, LISTENER, "everything")
    response = await subscribe(api, "dc_*", listener)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["emitter_id"] == "dc_*"
    # Also subscribed explicitly to the first: one delivery per event all the same.
    assert (await subscribe(api, first, listener)).status_code == 200

    await emit(api, first, {"payload": {"from": "first"}})
    await emit(api, second, {"payload": {"from": "second"}})
    await api.platform.jobs.drain()
    # The listener's own emits (one per event heard) match dc_* too, but never come back.
    assert sorted(await heard(api, listener), key=str) == [{"from": "first"}, {"from": "second"}]
    # Nothing is left to run.
    async with api.platform.db.connect() as conn:
        left = await conn.scalar(sa.select(sa.func.count()).where(jobs_table.c.status != "done"))
    assert left == 0


async def test_a_chain_of_listeners(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    middle = await deploy(api, LISTENER, "middle")
    last = await deploy(api, LISTENER, "last")
    await subscribe(api, emitter, middle)
    await subscribe(api, middle, last)
    await emit(api, emitter, {"payload": 7})
    await api.platform.jobs.drain()
    assert await heard(api, last) == [{"heard": 7}]


async def test_creating_twice_returns_the_same_subscription(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    first = (await subscribe(api, emitter, listener, "ch")).json()["data"]
    again = (await subscribe(api, emitter, listener, "ch")).json()["data"]
    assert again == first
    other_channel = (await subscribe(api, emitter, listener)).json()["data"]
    assert other_channel["id"] != first["id"]

    listed = (await api.client.get("/v1/users/me/subscriptions")).json()
    assert list(listed) == ["data"]  # as Pipedream's: no page_info
    assert sorted(listed["data"], key=lambda s: s["id"]) == sorted(
        [first, other_channel], key=lambda s: s["id"]
    )


async def test_unknown_and_foreign_ids_are_404_naming_the_parameter(
    api: Api, other_api: Api
) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    theirs = await deploy(other_api, LISTENER, "theirs")

    body = assert_error(await subscribe(api, "dc_nope", listener), 404, "not_found")
    assert body["field"] == "emitter_id" and "dc_nope" in body["error"]
    body = assert_error(await subscribe(api, emitter, "dc_nope"), 404, "not_found")
    assert body["field"] == "listener_id"
    body = assert_error(await subscribe(api, emitter, theirs), 404, "not_found")
    assert body["field"] == "listener_id"
    body = assert_error(await subscribe(other_api, emitter, theirs), 404, "not_found")
    assert body["field"] == "emitter_id"
    # Nothing was created on either side.
    assert (await api.client.get("/v1/users/me/subscriptions")).json() == {"data": []}
    assert (await other_api.client.get("/v1/users/me/subscriptions")).json() == {"data": []}


async def test_listeners_that_cannot_listen_are_400(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    saved = await api.client.post("/v1/components", json={"component_code": ACTION})
    assert saved.status_code == 200, saved.text
    action_id = saved.json()["data"]["id"]

    body = assert_error(await subscribe(api, emitter, action_id), 400, "invalid_request")
    assert body["field"] == "listener_id" and "action" in body["error"]
    body = assert_error(await subscribe(api, emitter, "p_abc123"), 404, "not_found")
    assert body["field"] == "listener_id" and "workflow p_abc123" in body["error"]
    body = assert_error(await subscribe(api, "p_abc123", emitter), 404, "not_found")
    assert body["field"] == "emitter_id"
    body = assert_error(await subscribe(api, emitter, "dc_*"), 400, "invalid_request")
    assert body["field"] == "listener_id"
    body = assert_error(await subscribe(api, emitter, emitter), 400, "invalid_request")
    assert body["field"] == "listener_id" and "named channel" in body["error"]
    body = assert_error(await subscribe(api, emitter, emitter, "$errors"), 400, "invalid_request")
    assert body["field"] == "listener_id" and "its own errors" in body["error"]
    response = await api.client.post("/v1/subscriptions", params={"listener_id": emitter})
    body = assert_error(response, 400, "invalid_request")
    assert body["field"] == "emitter_id"


async def test_a_source_may_listen_to_its_own_named_channel(api: Api) -> None:
    # Pipedream's scheduled-tasks source does this: it emits to "self" and hears it.
    code = """
    export default {
      name: "Self", version: "0.0.1",
      async run(event) {
        if (event.again) this.$emit({ final: event.n }, { name: "done" });
        else this.$emit({ again: true, n: event.n }, { name: "self" });
      },
    };
    """
    source = await deploy(api, code, "self")
    assert (await subscribe(api, source, source, "self")).status_code == 200
    response = await api.client.post(f"/v1/sources/{source}/run", json={"event": {"n": 3}})
    assert response.json()["data"]["ok"]
    await api.platform.jobs.drain()
    page = (
        await api.client.get(
            f"/v1/sources/{source}/event_summaries",
            params={"expand": "event", "event_name": "done"},
        )
    ).json()
    assert [e["event"] for e in page["data"]] == [{"final": 3}]


async def test_delete_a_subscription(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    await subscribe(api, emitter, listener, "ch")
    params = {"emitter_id": emitter, "listener_id": listener, "event_name": "ch"}
    response = await api.client.delete("/v1/subscriptions", params=params)
    assert response.status_code == 200 and response.json() == {}
    assert_error(await api.client.delete("/v1/subscriptions", params=params), 404, "not_found")
    await emit(api, emitter, {"payload": 1, "channel": "ch"})
    await api.platform.jobs.drain()
    assert await heard(api, listener) == []


async def test_deleting_a_source_removes_its_subscriptions(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    keeper = await deploy(api, LISTENER, "keeper")
    await subscribe(api, emitter, listener)
    await subscribe(api, listener, keeper)
    kept = (await subscribe(api, emitter, keeper)).json()["data"]
    assert (await api.client.delete(f"/v1/sources/{listener}")).status_code == 200
    assert (await api.client.get("/v1/users/me/subscriptions")).json() == {"data": [kept]}


async def test_a_delivery_to_a_deleted_listener_is_skipped(api: Api) -> None:
    emitter = await deploy(api, EMITTER, "emitter")
    listener = await deploy(api, LISTENER, "listener")
    await subscribe(api, emitter, listener)
    await emit(api, emitter, {"payload": 1})  # the delivery is queued, not yet run
    assert (await api.client.delete(f"/v1/sources/{listener}")).status_code == 200
    assert await api.platform.jobs.drain() >= 1
    async with api.platform.db.connect() as conn:
        statuses = (
            await conn.execute(
                sa.select(jobs_table.c.status).where(jobs_table.c.target_id == listener)
            )
        ).all()
    assert [s.status for s in statuses] in ([], ["done"])
