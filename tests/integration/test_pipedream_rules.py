"""``SLUICE_COMPONENT_RULES=pipedream`` accepts what Pipedream accepts and the spec refuses,
on both dialects; the spec's rules (the default) still refuse each. Real Node loads and runs
every component; the shapes are Pipedream's: the quickstart's sources have no ``version``, the
``schedule`` app's sources no ``run()``, shopify's metafield actions' ``additionalProps()``
returns ``undefined`` entries, and an ``http_request`` prop may have a default and no type."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from sluice.platform import Platform
from tests.conftest import Api, account_client
from tests.integration.test_destinations import HttpServer, http_server

#: Pipedream's quickstart source: no version.
NO_VERSION = """
export default {
  name: "Quickstart",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit({ body: event.body }); },
};
"""

#: Shaped like Pipedream's schedule app's custom-interval source: a timer from a
#: propDefinition, no run(); the platform emits each tick.
SCHEDULE = """
const schedule = { type: "app", app: "schedule",
  propDefinitions: { cron: { type: "$.interface.timer", label: "Schedule",
                             default: { intervalSeconds: 900 } } } };
export default {
  name: "Custom Interval", key: "schedule-custom-interval", version: "0.0.2", type: "source",
  props: { cron: { propDefinition: [schedule, "cron"] } },
};
"""

#: Shaped like shopify's metafield actions: additionalProps() returns undefined entries.
METAFIELDS = """
export default {
  name: "Update Metafield", key: "shop-update-metafield", version: "0.0.1", type: "action",
  props: { owner: { type: "string", reloadProps: true } },
  async additionalProps() {
    return { value: this.owner ? { type: "string", label: "Value" } : undefined,
             extra: undefined };
  },
  async run() { return { value: this.value ?? null }; },
};
"""


def requester(url: str) -> str:
    """An http_request prop with a default and no type."""
    return f"""
export default {{
  name: "Request", key: "typeless-request", version: "0.0.1", type: "action",
  props: {{ req: {{ label: "Request", default: {{ method: "GET", url: "{url}" }} }} }},
  async run() {{ const r = await this.req.execute(); return {{ status: r.status, data: r.data }}; }},
}};
"""


@dataclasses.dataclass
class Env:
    pipedream: Api
    spec: Api
    server: HttpServer


@pytest_asyncio.fixture(loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    """This dialect's platform as the spec has it, and one with the pipedream rules (its
    egress allowing one loopback server)."""
    async with http_server() as server:
        settings = dataclasses.replace(
            platform.settings,
            component_rules="pipedream",
            egress_allow=f"127.0.0.1:{server.port}",
        )
        async with (
            Platform.open(settings, background=False) as opened,
            account_client(opened, "pd-rules") as pipedream,
            account_client(platform, "spec-rules") as spec,
        ):
            yield Env(pipedream, spec, server)


async def refused(api: Api, path: str, body: dict[str, Any], field: str) -> None:
    response = await api.client.post(path, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field, response.text


async def test_a_source_without_version_deploys_as_0_0_1(env: Env) -> None:
    await refused(env.spec, "/v1/sources", {"component_code": NO_VERSION}, "version")
    deployed = await env.pipedream.client.post("/v1/sources", json={"component_code": NO_VERSION})
    assert deployed.status_code == 200, deployed.text
    component = await env.pipedream.client.get(
        f"/v1/components/{deployed.json()['data']['component_id']}"
    )
    data = component.json()["data"]
    assert data["version"] == "0.0.1", data
    assert any(w.startswith("version: none given") for w in data["warnings"]), data


async def test_a_schedule_source_without_run_emits_each_tick(env: Env) -> None:
    await refused(env.spec, "/v1/sources", {"component_code": SCHEDULE}, "run")
    deployed = await env.pipedream.client.post(
        "/v1/sources",
        json={"component_code": SCHEDULE, "configured_props": {"cron": {"intervalSeconds": 60}}},
    )
    assert deployed.status_code == 200, deployed.text
    source_id = deployed.json()["data"]["id"]
    ran = await env.pipedream.client.post(f"/v1/sources/{source_id}/run")
    assert ran.status_code == 200 and ran.json()["data"]["ok"] is True, ran.text
    assert len(ran.json()["data"]["emitted"]) == 1, ran.text
    events = await env.pipedream.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"}
    )
    (event,) = [e["event"] for e in events.json()["data"]]
    assert event["interval_seconds"] == 60 and isinstance(event["timestamp"], int), event


async def test_undefined_entries_of_additional_props_are_left_out(env: Env) -> None:
    for api in (env.spec, env.pipedream):
        saved = await api.client.post("/v1/components", json={"component_code": METAFIELDS})
        assert saved.status_code == 200, saved.text
    spec = await env.spec.client.post(
        "/v1/components/shop-update-metafield/props", json={"configured_props": {}}
    )
    assert spec.status_code == 200 and "undefined" in spec.json()["data"]["errors"][0], spec.text
    # The form's first load (no owner yet), then with an owner: the defined entry is added.
    for values, expected in (({}, ["owner"]), ({"owner": "product"}, ["owner", "value"])):
        reloaded = await env.pipedream.client.post(
            "/v1/components/shop-update-metafield/props", json={"configured_props": values}
        )
        data = reloaded.json()["data"]
        assert data["errors"] == [], data
        assert [p["name"] for p in data["dynamicProps"]["configurableProps"]] == expected
    ran = await env.pipedream.client.post(
        "/v1/actions/run",
        json={
            "component_key": "shop-update-metafield",
            "configured_props": {"owner": "product", "value": "v1"},
        },
    )
    assert ran.status_code == 200 and ran.json()["data"]["ret"] == {"value": "v1"}, ran.text


async def test_an_http_request_prop_without_type_runs_its_default(env: Env) -> None:
    code = requester(f"http://127.0.0.1:{env.server.port}/ping")
    await refused(env.spec, "/v1/components", {"component_code": code}, "props.req.type")
    ran = await env.pipedream.client.post("/v1/actions/run", json={"component_code": code})
    assert ran.status_code == 200, ran.text
    assert ran.json()["data"]["ret"]["status"] == 200, ran.text
    assert env.server.received[-1].target == "/ping"
