"""Environment variables (the requirement: "Environment variables are not readable inside
sources or actions. In actions, environment variables can be passed as prop values from the
workflow"), on both dialects: set over ``/v1``, read by workflow code steps as
``process.env``, passed to an action step's props with ``{{process.env.NAME}}``, never read by
an action's or a source's code, never shown again, encrypted at rest, per account."""

from __future__ import annotations

import secrets

import sqlalchemy as sa

from sluice.platform import Platform
from sluice.storage.tables import env_vars as env_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_workflows import create, run, step

ACTION = """
export default {
  name: "Env probe", key: "env-probe-%s", version: "0.0.1", type: "action",
  props: { token: { type: "string" } },
  async run() { return { prop: this.token, env: process.env.API_TOKEN ?? null }; },
};
"""

SOURCE = """
export default { name: "Env source", version: "1",
  async run() { this.$emit({ env: process.env.API_TOKEN ?? null }); } };
"""


async def test_set_list_and_delete(api: Api, platform: Platform) -> None:
    put = await api.client.put("/v1/env_vars/API_TOKEN", json={"value": "s3cret-one"})
    assert put.status_code == 200, put.text
    assert put.json()["data"]["name"] == "API_TOKEN"
    listed = (await api.client.get("/v1/users/me/env_vars")).json()["data"]
    assert [v["name"] for v in listed] == ["API_TOKEN"]
    assert "s3cret-one" not in str(listed)  # never shown again
    async with platform.db.connect() as conn:
        stored = (await conn.execute(sa.select(env_table.c.value))).scalars().all()
    assert stored and not any("s3cret-one" in v for v in stored)  # encrypted at rest
    body = assert_error(
        await api.client.put("/v1/env_vars/1BAD", json={"value": "x"}), 400, "invalid_request"
    )
    assert body["field"] == "name"
    assert_error(await api.client.put("/v1/env_vars/OK", json={"value": 1}), 400, "invalid_request")
    assert (await api.client.delete("/v1/env_vars/API_TOKEN")).status_code == 200
    assert_error(await api.client.delete("/v1/env_vars/API_TOKEN"), 404, "not_found")
    assert (await api.client.get("/v1/users/me/env_vars")).json()["data"] == []


async def test_code_steps_read_them_and_actions_get_them_only_as_props(
    api: Api, other_api: Api
) -> None:
    key = f"{secrets.token_hex(3)}"
    saved = await api.client.post("/v1/components", json={"component_code": ACTION % key})
    assert saved.status_code == 200, saved.text
    assert (await api.client.put("/v1/env_vars/API_TOKEN", json={"value": "tok-1"})).is_success
    workflow = await create(
        api,
        [
            step("before", "async run() { return process.env.API_TOKEN ?? null; }"),
            {
                "name": "probe",
                "action": f"env-probe-{key}",
                "props": {"token": "{{process.env.API_TOKEN}}"},
            },
            step("after", "async run() { return process.env.API_TOKEN ?? null; }"),
        ],
    )
    result = await run(api, workflow["id"], {})
    values = [s["return_value"] for s in result["steps"]]
    assert values == ["tok-1", {"prop": "tok-1", "env": None}, "tok-1"], values

    # A change made through this process applies to the next run at once.
    assert (await api.client.put("/v1/env_vars/API_TOKEN", json={"value": "tok-2"})).is_success
    again = await run(api, workflow["id"], {})
    assert again["steps"][0]["return_value"] == "tok-2"

    # A source never reads them.
    made = await api.client.post("/v1/sources", json={"component_code": SOURCE})
    ran = await api.client.post(f"/v1/sources/{made.json()['data']['id']}/run", json={})
    assert ran.json()["data"]["ok"], ran.text
    page = await api.client.get(
        f"/v1/sources/{made.json()['data']['id']}/event_summaries", params={"expand": "event"}
    )
    assert page.json()["data"][0]["event"] == {"env": None}

    # Another account has none of them.
    assert (await other_api.client.get("/v1/users/me/env_vars")).json()["data"] == []
    theirs = await create(
        other_api, [step("read", "async run() { return process.env.API_TOKEN ?? null; }")]
    )
    assert (await run(other_api, theirs["id"], {}))["steps"][0]["return_value"] is None
