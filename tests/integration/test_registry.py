"""The public registry: publishing rules, reading by key, deploying from any account, and new
versions leaving older deployments alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from sluice.platform import Platform
from tests.conftest import Api, account_client
from tests.integration.test_api_basics import assert_error


def source(version: str, key: str = "demo-new-thing", name: str = "New Thing") -> str:
    return f"""
export default {{
  key: "{key}", name: "{name}", version: "{version}",
  props: {{ demo: {{ type: "app", app: "demo" }} }},
  async run() {{ return "{version}"; }},
}};
"""


@pytest_asyncio.fixture(loop_scope="session")
async def admin(platform: Platform) -> AsyncIterator[Api]:
    async with account_client(platform, "registry-admin", is_admin=True) as a:
        yield a


async def publish(admin: Api, code: str):  # type: ignore[no-untyped-def]
    return await admin.client.post("/v1/components/registry", json={"component_code": code})


async def test_publishing_rules(admin: Api, api: Api) -> None:
    assert_error(
        await api.client.post("/v1/components/registry", json={"component_code": source("0.0.1")}),
        403,
        "forbidden",
    )
    body = assert_error(await publish(admin, source("1")), 400, "invalid_component")
    assert body["field"] == "version" and "semantic" in body["error"]
    body = assert_error(
        await publish(admin, source("0.0.1", key="demo-other")), 400, "invalid_component"
    )
    assert body["field"] == "key" and "demo-new-thing" in body["error"]
    body = assert_error(
        await publish(admin, source("0.0.1", key="slack-new-thing")), 400, "invalid_component"
    )
    assert "demo" in body["error"]


async def test_deploy_by_key_and_versions(admin: Api, api: Api, other_api: Api) -> None:
    key = f"demo-thing-{admin.account_id[-6:].lower()}"
    name = f"Thing {admin.account_id[-6:].lower()}"
    first = await publish(admin, source("0.1.0", key, name))
    assert first.status_code == 200, first.text
    assert first.json()["data"]["registry"] is True
    read = (await api.client.get(f"/v1/components/registry/{key}")).json()["data"]
    assert read["version"] == "0.1.0" and read["versions"] == ["0.1.0"]
    assert_error(await api.client.get("/v1/components/registry/demo-nothing"), 404, "not_found")

    connected = await api.client.post("/v1/accounts", json={"app": "demo", "credentials": {}})
    props = {"demo": {"authProvisionId": connected.json()["data"]["id"]}}
    old = await api.client.post(
        "/v1/sources", json={"component_key": key, "configured_props": props}
    )
    assert old.status_code == 200, old.text
    old_id = old.json()["data"]["id"]

    assert_error(await publish(admin, source("0.1.0", key, name)), 409, "conflict")
    assert_error(await publish(admin, source("0.0.9", key, name)), 409, "conflict")
    assert (await publish(admin, source("0.2.0-beta.1", key, name))).status_code == 200
    assert (await publish(admin, source("0.2.0", key, name))).status_code == 200
    read = (await other_api.client.get(f"/v1/components/registry/{key}")).json()["data"]
    assert read["version"] == "0.2.0"
    assert read["versions"] == ["0.1.0", "0.2.0-beta.1", "0.2.0"]

    new = await api.client.post(
        "/v1/sources", json={"component_key": key, "configured_props": props}
    )
    new_id = new.json()["data"]["id"]
    runs = [
        (await api.client.post(f"/v1/sources/{i}/run", json={})).json()["data"]["value"]
        for i in (old_id, new_id)
    ]
    assert runs == ["0.1.0", "0.2.0"]  # the older deployment keeps its version


async def test_a_registry_action_run_by_hand_uses_the_callers_data_stores(
    admin: Api, api: Api
) -> None:
    """Run by another account, a published action reaches that account's stores, never the
    stores of the admin who published it (even one with the same name)."""
    key = f"demo-remember-{admin.account_id[-6:].lower()}"
    action = f"""
export default {{
  key: "{key}", name: "Remember {key[-6:]}", version: "0.0.1", type: "action",
  props: {{ store: {{ type: "data_store" }} }},
  async run() {{
    const seen = await this.store.get("who");
    await this.store.set("who", "caller");
    return seen ?? null;
  }},
}};
"""
    assert (await publish(admin, action)).status_code == 200
    for owner in (admin, api):
        made = await owner.client.post("/v1/data_stores", json={"name": "cache"})
        assert made.status_code in (200, 409), made.text
    put = await admin.client.put("/v1/data_stores/cache/records/who", json={"value": "admin"})
    assert put.status_code == 200, put.text

    run = await api.client.post(
        "/v1/actions/run",
        json={"component_key": key, "configured_props": {"store": "cache"}},
    )
    assert run.status_code == 200, run.text
    assert run.json()["data"]["ret"] is None, run.json()  # not the admin's "admin"
    mine = (await api.client.get("/v1/data_stores/cache/records/who")).json()["data"]
    assert mine["value"] == "caller"
    theirs = (await admin.client.get("/v1/data_stores/cache/records/who")).json()["data"]
    assert theirs["value"] == "admin"


async def test_a_data_store_keys_dropdown_lists_the_callers_keys(admin: Api, api: Api) -> None:
    """data_stores' `key` options (`dataStore.keys()` of the `dataStore` prop) list the store of
    the account asking, never the one of the admin who published the action."""
    key = f"data_stores-forget-{admin.account_id[-6:].lower()}"
    action = f"""
const app = {{ type: "app", app: "data_stores", propDefinitions: {{
  dataStore: {{ type: "data_store", label: "Data Store" }},
  key: {{ type: "string", label: "Key", async options({{ dataStore }}) {{ return dataStore.keys(); }} }},
}} }};
export default {{
  key: "{key}", name: "Forget {key[-6:]}", version: "0.0.1", type: "action",
  props: {{ app, dataStore: {{ propDefinition: [app, "dataStore"] }},
           key: {{ propDefinition: [app, "key", ({{ dataStore }}) => ({{ dataStore }})] }} }},
  async run() {{ await this.dataStore.delete(this.key); }},
}};
"""
    assert (await publish(admin, action)).status_code == 200
    for owner, record in ((admin, "admins-key"), (api, "callers-key")):
        made = await owner.client.post("/v1/data_stores", json={"name": "cache"})
        assert made.status_code in (200, 409), made.text
        put = await owner.client.put(f"/v1/data_stores/cache/records/{record}", json={"value": 1})
        assert put.status_code == 200, put.text

    listed = await api.client.post(
        f"/v1/components/{key}/props/key/options",
        json={"configured_props": {"dataStore": "cache"}},
    )
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"]["options"] == ["callers-key"]
