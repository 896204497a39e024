"""``$logs`` subscriptions (issue 27): a source's or a workflow's console lines reach its
``$logs`` listeners, one event per invocation or run that logged, on both dialects."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_sources_api import deploy
from tests.integration.test_workflows import create, run, step

CHATTY = """
export default {
  name: "Chatty", version: "0.0.1", props: {},
  async run(event) {
    console.log("got", event.n);
    console.error("careful");
    if (event.n !== 0) this.$emit({ n: event.n });
  },
};
"""

QUIET = """
export default {
  name: "Quiet", version: "0.0.1", props: {},
  async run(event) { this.$emit({ n: event.n }); },
};
"""

ARCHIVE = """
export default {
  name: "Archive", version: "0.0.1", props: {},
  async run(event) { this.$emit(event); },
};
"""

KEEP = step("keep", "async run({ steps }) { return steps.trigger.event; }")


async def subscribe(api: Api, emitter_id: str, listener_id: str) -> None:
    linked = await api.client.post(
        "/v1/subscriptions",
        params={"emitter_id": emitter_id, "listener_id": listener_id, "event_name": "$logs"},
    )
    assert linked.status_code == 200, linked.text


async def events_of(api: Api, source_id: str) -> list[Any]:
    page = await api.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"}
    )
    assert page.status_code == 200, page.text
    return [item["event"] for item in reversed(page.json()["data"])]


async def test_a_sources_logs_reach_its_logs_listener(api: Api) -> None:
    chatty, quiet = await deploy(api, CHATTY), await deploy(api, QUIET)
    listener = await create(api, [KEEP], name="log-archive")
    await subscribe(api, chatty["id"], listener["id"])
    await subscribe(api, quiet["id"], listener["id"])
    for n in (1, 0):
        ran = await api.client.post(f"/v1/sources/{chatty['id']}/run", json={"event": {"n": n}})
        assert ran.status_code == 200, ran.text
    # A source that logs nothing sends nothing.
    assert (await api.client.post(f"/v1/sources/{quiet['id']}/run", json={"event": {}})).is_success
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    # Two listener runs (emit jobs may run in either order): by what they logged.
    got = sorted((r["steps"][0]["return_value"] for r in runs), key=lambda e: e["logs"][0]["msg"])
    assert len(got) == 2, got  # one event per invocation, with or without emits
    for event, n in zip(got, (0, 1), strict=True):
        assert event["emitter_id"] == chatty["id"] and event["invocation_id"]
        assert [(line["level"], line["msg"]) for line in event["logs"]] == [
            ("log", f"got {n}"),
            ("error", "careful"),
        ]
        assert all(isinstance(line["ts"], int) for line in event["logs"])
    # Logs are not kept as the source's events: its list holds its one emit.
    assert await events_of(api, chatty["id"]) == [{"n": 1}]


async def test_a_workflows_logs_reach_a_listening_source(api: Api) -> None:
    logs = step("say", 'async run({ steps }) { console.log("hello", steps.trigger.event.who); }')
    workflow = await create(api, [logs, KEEP], name="says-hello")
    archive = await deploy(api, ARCHIVE)
    await subscribe(api, workflow["id"], archive["id"])
    done = await run(api, workflow["id"], {"who": "Leia"})
    assert done["status"] == "success", done
    await api.platform.jobs.drain()
    [event] = await events_of(api, archive["id"])
    assert event["emitter_id"] == workflow["id"] and event["invocation_id"] == done["id"]
    assert [(line["step"], line["msg"]) for line in event["logs"]] == [("say", "hello Leia")]


async def test_logs_subscriptions_refused_and_auto(api: Api) -> None:
    source = await deploy(api, CHATTY)
    own = await api.client.post(
        "/v1/subscriptions",
        params={"emitter_id": source["id"], "listener_id": source["id"], "event_name": "$logs"},
    )
    body = assert_error(own, 400, "invalid_request")
    assert "its own logs" in body["error"], body
    listener = await create(api, [KEEP], name="every-log")
    auto = await api.client.post(
        "/v1/auto_subscriptions", params={"event_name": "$logs", "listener_id": listener["id"]}
    )
    assert auto.status_code == 200, auto.text
    later = await deploy(api, CHATTY)  # created after: subscribed for its logs
    assert await api.client.post(f"/v1/sources/{later['id']}/run", json={"event": {"n": 5}})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"]["emitter_id"] for r in runs] == [later["id"]]
