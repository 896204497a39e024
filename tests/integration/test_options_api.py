"""POST /v1/components/{id}/props/{prop}/options: static and async options while configuring."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

COMPONENT = """
const app = {
  type: "app",
  app: "shop",
  propDefinitions: {
    item: {
      type: "string",
      async options({ page, prevContext, query, kind }) {
        return { options: [`${this.$auth.region}-${kind}-${page}-${prevContext.next ?? "none"}-${query}`],
                 context: { next: page + 1 } };
      },
    },
  },
};
export default {
  name: "Options", key: "shop-options", version: "0.0.1",
  props: {
    shop: app,
    kind: { type: "string", options: [{ label: "Big", value: "big" }, "small"] },
    item: { propDefinition: [app, "item", (c) => ({ kind: c.kind })] },
    mine: { type: "integer", async options() { return [this.kind.length, 2]; } },
    broken: { type: "string", optional: true, async options() { throw new Error("no access"); } },
    odd: { type: "string", optional: true, async options() { return 5; } },
    plain: { type: "string", optional: true },
  },
  async run() {},
};
"""


async def options(api: Api, component: str, prop: str, body: Any = None) -> Any:
    return await api.client.post(f"/v1/components/{component}/props/{prop}/options", json=body)


async def test_static_and_async_options_with_pages_and_auth(api: Api) -> None:
    saved = (await api.client.post("/v1/components", json={"component_code": COMPONENT})).json()
    component_id = saved["data"]["id"]
    account = (
        await api.client.post("/v1/accounts", json={"app": "shop", "credentials": {"region": "eu"}})
    ).json()["data"]

    static = await options(api, component_id, "kind")
    assert static.json() == {
        "data": {"options": [{"label": "Big", "value": "big"}, "small"], "context": None}
    }

    configured = {"shop": {"authProvisionId": account["id"]}, "kind": "big"}
    first = await options(api, component_id, "item", {"configured_props": configured})
    assert first.json()["data"] == {"options": ["eu-big-0-none-null"], "context": {"next": 1}}
    second = await options(
        api,
        "shop-options",  # by key too
        "item",
        {"configured_props": configured, "page": 1, "prev_context": {"next": 1}, "query": "q"},
    )
    assert second.json()["data"]["options"] == ["eu-big-1-1-q"]

    mine = await options(api, component_id, "mine", {"configured_props": {"kind": "small"}})
    assert mine.json()["data"] == {"options": [5, 2], "context": None}


async def test_errors_name_what_to_fix(api: Api, other_api: Api) -> None:
    saved = (await api.client.post("/v1/components", json={"component_code": COMPONENT})).json()
    cid = saved["data"]["id"]
    assert_error(await options(api, cid, "nope"), 404, "not_found")
    assert_error(await options(api, cid, "plain"), 400, "invalid_request")
    body = assert_error(await options(api, cid, "broken"), 400, "invalid_props")
    assert "no access" in body["error"] and body["details"]["error"]["message"] == "no access"
    assert_error(await options(api, cid, "odd"), 400, "invalid_component")
    unknown = await options(api, cid, "mine", {"configured_props": {"zzz": 1}})
    assert_error(unknown, 400, "invalid_props")
    stranger = await options(
        api, cid, "item", {"configured_props": {"shop": {"authProvisionId": "apn_nope"}}}
    )
    assert_error(stranger, 400, "invalid_props")
    assert_error(await options(other_api, cid, "kind"), 404, "not_found")
