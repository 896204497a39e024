"""Dynamic props (reloadProps, additionalProps) and configured values passed as they are."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sluice.storage.tables import timers
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

#: Shaped like the registry's webhook-auth action: the props it adds depend on `mode`.
GATE = """
export default {
  name: "Gate", key: "gate", version: "0.0.1", type: "action",
  props: {
    given: { type: "string" },
    mode: { type: "string", reloadProps: true,
            options: [{ label: "Bearer", value: "bearer" }, { label: "Key", value: "key" }] },
  },
  async additionalProps(previous) {
    if (this.mode === "bearer") return { bearer: { type: "string", label: "Bearer Token" } };
    if (this.mode === "key") {
      return { key: { type: "string", secret: true },
               region: { type: "string", optional: true, options: async () => ["eu", "us"] } };
    }
    if (this.mode === "broken") throw new Error("no such mode");
    return {};
  },
  async run({ $ }) {
    const expected = this.bearer ?? this.key;
    $.export("allowed", this.given === expected);
    return { types: [typeof this.bearer, typeof this.key], region: this.region ?? null };
  },
};
"""

SOURCE = """
export default {
  name: "Dyn Source", version: "0.0.1",
  props: { db: "$.service.db", kind: { type: "string", reloadProps: true } },
  async additionalProps() {
    return this.kind === "counted" ? { start: { type: "integer" } } : {};
  },
  async run() { this.$emit({ kind: this.kind, start: this.start ?? null }); },
};
"""

#: Values reach run() with the type they have (helper_functions' object-to-JSON and
#: export-variables rely on it).
TYPES = """
export default {
  name: "Types", version: "0.0.1", type: "action",
  props: { s: { type: "string" }, o: { type: "object" }, n: { type: "integer", optional: true } },
  async run() { return { s: this.s, o: this.o, n: this.n, kinds: [typeof this.s, typeof this.o] }; },
};
"""


async def save(api: Api, code: str) -> dict[str, Any]:
    response = await api.client.post("/v1/components", json={"component_code": code})
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def reload(api: Api, component: str, values: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.post(
        f"/v1/components/{component}/props", json={"configured_props": values}
    )
    assert response.status_code == 200, response.text
    return response.json()["data"]


def names(props: list[dict[str, Any]]) -> list[str]:
    return [p["name"] for p in props]


async def test_reload_props_answers_the_full_list(api: Api) -> None:
    saved = await save(api, GATE)
    mode = next(p for p in saved["configurable_props"] if p["name"] == "mode")
    assert mode["reloadProps"] is True
    bearer = await reload(api, saved["id"], {"mode": "bearer"})
    assert bearer["errors"] == [] and bearer["observations"] == []
    dynamic = bearer["dynamicProps"]
    assert dynamic["id"].startswith("dyp_")
    assert names(dynamic["configurableProps"]) == ["given", "mode", "bearer"]
    assert dynamic["configurableProps"][2]["label"] == "Bearer Token"
    # The same values give the same id; other values another list and id.
    assert (await reload(api, "gate", {"mode": "bearer"}))["dynamicProps"]["id"] == dynamic["id"]
    key = (await reload(api, "gate", {"mode": "key"}))["dynamicProps"]
    assert names(key["configurableProps"]) == ["given", "mode", "key", "region"]
    assert key["configurableProps"][3]["remoteOptions"] is True and key["id"] != dynamic["id"]
    # An added prop's async options run with the values configured so far.
    options = await api.client.post(
        "/v1/components/gate/props/region/options", json={"configured_props": {"mode": "key"}}
    )
    assert options.json()["data"]["options"] == ["eu", "us"], options.text
    broken = await reload(api, "gate", {"mode": "broken"})
    assert "no such mode" in broken["errors"][0]
    assert names(broken["dynamicProps"]["configurableProps"]) == ["given", "mode"]


async def test_action_runs_accept_and_check_added_props(api: Api) -> None:
    await save(api, GATE)
    ran = await api.client.post(
        "/v1/actions/run",
        json={
            "component_key": "gate",
            "configured_props": {"given": "Bearer t", "mode": "bearer", "bearer": "Bearer t"},
        },
    )
    assert ran.status_code == 200, ran.text
    assert ran.json()["data"]["exports"]["allowed"] is True
    assert ran.json()["data"]["ret"]["types"] == ["string", "undefined"]
    # A prop the values do not add is unknown; an added required one is required.
    unknown = await api.client.post(
        "/v1/actions/run",
        json={"component_key": "gate", "configured_props": {"given": "x", "bearer": "y"}},
    )
    assert assert_error(unknown, 400, "invalid_props")["field"] == "configured_props.bearer"
    missing = await api.client.post(
        "/v1/actions/run",
        json={"component_key": "gate", "configured_props": {"given": "x", "mode": "key"}},
    )
    assert assert_error(missing, 400, "invalid_props")["field"] == "configured_props.key"
    broken = await api.client.post(
        "/v1/actions/run",
        json={"component_key": "gate", "configured_props": {"given": "x", "mode": "broken"}},
    )
    assert "no such mode" in assert_error(broken, 400, "invalid_props")["error"]


async def test_sources_deploy_and_update_with_added_props(api: Api) -> None:
    deployed = await api.client.post(
        "/v1/sources",
        json={"component_code": SOURCE, "configured_props": {"kind": "counted", "start": 7}},
    )
    assert deployed.status_code == 200, deployed.text
    source = deployed.json()["data"]
    assert source["configured_props"]["start"] == 7
    run = await api.client.post(f"/v1/sources/{source['id']}/run", json={})
    assert run.status_code == 200, run.text
    events = await api.client.get(f"/v1/sources/{source['id']}/event_summaries?expand=event")
    assert events.json()["data"][0]["event"] == {"kind": "counted", "start": 7}
    # An update that changes the controlling value drops what it no longer adds: refused.
    stale = await api.client.put(
        f"/v1/sources/{source['id']}", json={"configured_props": {"kind": "plain", "start": 1}}
    )
    assert assert_error(stale, 400, "invalid_props")["field"] == "configured_props.start"
    fine = await api.client.put(
        f"/v1/sources/{source['id']}", json={"configured_props": {"kind": "plain"}}
    )
    assert fine.status_code == 200, fine.text


async def test_values_reach_run_with_their_own_type(api: Api) -> None:
    ran = await api.client.post(
        "/v1/actions/run",
        json={
            "component_code": TYPES,
            "configured_props": {"s": {"a": [1, 2]}, "o": "{not json", "n": "5"},
        },
    )
    assert ran.status_code == 200, ran.text
    ret = ran.json()["data"]["ret"]
    assert ret["s"] == {"a": [1, 2]} and ret["o"] == "{not json"
    assert ret["kinds"] == ["object", "string"]
    # The runtime reads an integer prop's numeric text as the number, as before.
    assert ret["n"] == 5
    missing = await api.client.post(
        "/v1/actions/run", json={"component_code": TYPES, "configured_props": {"s": "x"}}
    )
    assert assert_error(missing, 400, "invalid_props")["field"] == "configured_props.o"


async def test_workflow_action_steps_take_added_props(api: Api) -> None:
    await save(api, GATE)
    created = await api.client.post(
        "/v1/workflows",
        json={
            "trigger": {"type": "manual"},
            "steps": [
                {
                    "name": "gate",
                    "action": "gate",
                    "props": {
                        "given": "{{steps.trigger.event.auth}}",
                        "mode": "key",
                        "key": "k-1",
                    },
                }
            ],
        },
    )
    assert created.status_code == 200, created.text
    workflow = created.json()["data"]
    assert workflow["steps"][0]["secret_props"] == ["key"]
    runs = []
    for auth in ("k-1", "k-2"):
        ran = await api.client.post(
            f"/v1/workflows/{workflow['id']}/runs", json={"event": {"auth": auth}}
        )
        assert ran.status_code == 200, ran.text
        runs.append(ran.json()["data"]["steps"][0]["exports"]["allowed"])
    assert runs == [True, False]
    unknown = await api.client.post(
        "/v1/workflows",
        json={
            "trigger": {"type": "manual"},
            "steps": [{"name": "g", "action": "gate", "props": {"given": "x", "bearer": "y"}}],
        },
    )
    assert assert_error(unknown, 400, "invalid_props")["field"] == "steps[0].props.bearer"


#: Shaped like the registry's webhook sources whose interface depends on a setting: the HTTP
#: interface comes from additionalProps(), and activate() registers this.http.endpoint.
HOOKED = """
export default {
  name: "Hooked", version: "0.0.1",
  props: { db: "$.service.db", mode: { type: "string", reloadProps: true } },
  async additionalProps() {
    return this.mode === "webhook" ? { http: { type: "$.interface.http" } } : {};
  },
  hooks: { async activate() { this.db.set("registered", this.http?.endpoint ?? null); } },
  async run(event) {
    this.$emit({ registered: this.db.get("registered"), endpoint: this.http?.endpoint ?? null,
                 body: event.body ?? null });
  },
};
"""


async def test_an_http_interface_from_additional_props_gets_an_endpoint(api: Api) -> None:
    deployed = await api.client.post(
        "/v1/sources", json={"component_code": HOOKED, "configured_props": {"mode": "webhook"}}
    )
    assert deployed.status_code == 200, deployed.text
    source = deployed.json()["data"]
    url = source["endpoint_url"]
    assert url and source["configured_props"]["http"] == {"endpoint_url": url}
    endpoint_id = url.rsplit("/", 1)[1]
    sent = await api.client.post(f"/e/{endpoint_id}", json={"n": 1})
    assert sent.status_code == 200, sent.text
    await api.platform.jobs.drain()
    events = await api.client.get(f"/v1/sources/{source['id']}/event_summaries?expand=event")
    assert events.json()["data"][0]["event"] == {
        "registered": url,
        "endpoint": url,
        "body": {"n": 1},
    }
    # An update keeps the endpoint; one whose additionalProps() no longer adds it drops it.
    kept = await api.client.put(
        f"/v1/sources/{source['id']}",
        json={"name": "renamed", "configured_props": {"mode": "webhook"}},
    )
    assert kept.status_code == 200 and kept.json()["data"]["endpoint_url"] == url, kept.text
    plain = await api.client.put(
        f"/v1/sources/{source['id']}", json={"configured_props": {"mode": "plain"}}
    )
    assert plain.status_code == 200, plain.text
    assert "endpoint_url" not in plain.json()["data"]
    assert "http" not in plain.json()["data"]["configured_props"]
    assert (await api.client.post(f"/e/{endpoint_id}", json={})).status_code == 404


TICKING = """
export default {
  name: "Ticking", version: "0.0.1",
  props: { mode: { type: "string", reloadProps: true } },
  async additionalProps() {
    return this.mode === "poll" ? { timer: { type: "$.interface.timer", default: { intervalSeconds: 120 } } } : {};
  },
  async run() {},
};
"""


async def timer_of(api: Api, source_id: str) -> int | None:
    async with api.platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(timers.c.interval_seconds).where(timers.c.deployment_id == source_id)
            )
        ).first()
    return None if row is None else int(row[0])


async def test_a_timer_from_additional_props_is_scheduled(api: Api) -> None:
    deployed = await api.client.post(
        "/v1/sources",
        json={
            "component_code": TICKING,
            "configured_props": {"mode": "poll", "timer": {"intervalSeconds": 90}},
        },
    )
    assert deployed.status_code == 200, deployed.text
    source = deployed.json()["data"]["id"]
    assert await timer_of(api, source) == 90
    for body, expected in (
        ({"name": "renamed"}, 90),
        ({"active": False}, None),
        ({"active": True}, 90),
        ({"configured_props": {"mode": "poll"}}, 120),
        ({"configured_props": {"mode": "plain"}}, None),
    ):
        updated = await api.client.put(f"/v1/sources/{source}", json=body)
        assert updated.status_code == 200, updated.text
        assert await timer_of(api, source) == expected, body
