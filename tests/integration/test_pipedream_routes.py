"""REST routes that scripts written for Pipedream's API call, on both dialects: the registry
searched by a sentence, an app by its id, a workspace's subscriptions and sources (a Sluice
account is its own workspace), and 501 naming Sluice's equivalent where none can exist."""

from __future__ import annotations

import secrets

from sluice.domain import apps as app_rules
from sluice.platform import Platform
from tests.conftest import Api, account_client
from tests.integration.test_api_basics import assert_error
from tests.integration.test_sources_api import deploy


def registry_component(app: str, name: str, kind: str, description: str) -> str:
    slug = name.lower().replace(" ", "-")
    return f"""
export default {{
  name: "{name}", key: "{app}-{slug}", version: "0.0.1", type: "{kind}",
  description: "{description}",
  props: {{}},
  async run() {{ return 1; }},
}};
"""


async def test_components_search_answers_keys_by_type(platform: Platform, api: Api) -> None:
    crm, chat = f"crm{secrets.token_hex(3)}", f"chat{secrets.token_hex(3)}"
    async with account_client(platform, "publisher", is_admin=True) as admin:
        for app, name, kind, description in (
            (crm, "New Contact", "source", "Emit an event for each new contact"),
            (crm, "Create Contact", "action", "Create a contact"),
            (chat, "Send Message", "action", "Send a message to a channel"),
            (chat, "New Reaction", "source", "Emit an event for each reaction"),
        ):
            code = registry_component(app, name, kind, description)
            published = await admin.client.post(
                "/v1/components/registry", json={"component_code": code}
            )
            assert published.status_code == 200, published.text
    query = f"Send a message to {chat} on new {crm} contacts"
    found = await api.client.get("/v1/components/search", params={"query": query})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["sources"][:1] == [f"{crm}-new-contact"], body
    assert body["actions"][:2] == [f"{chat}-send-message", f"{crm}-create-contact"], body
    only = await api.client.get(
        "/v1/components/search", params={"query": query, "app": chat, "debug": "true"}
    )
    data = only.json()
    assert data["actions"] == [f"{chat}-send-message"], data
    assert data["sources"] == [f"{chat}-new-reaction"], data  # "chat…" alone: 1 word of 5
    assert data["debug"]["scores"] == {
        f"{chat}-send-message": 0.6,
        f"{chat}-new-reaction": 0.2,
    }, data
    strict = await api.client.get(
        "/v1/components/search", params={"query": query, "similarity_threshold": "0.7"}
    )
    keys = strict.json()["sources"] + strict.json()["actions"]
    assert not any(k.startswith((crm, chat)) for k in keys), strict.text
    missing = await api.client.get("/v1/components/search")
    assert missing.status_code == 400, missing.text


async def test_an_app_by_its_id(api: Api) -> None:
    by_slug = (await api.client.get("/v1/apps/slack")).json()["data"]
    by_id = await api.client.get(f"/v1/apps/{app_rules.builtin_id('slack')}")
    assert by_id.status_code == 200 and by_id.json()["data"] == by_slug, by_id.text
    assert_error(await api.client.get("/v1/apps/app_zzzzzz"), 404, "not_found")


async def test_the_account_is_its_own_workspace(api: Api, other_api: Api) -> None:
    me = (await api.client.get("/v1/users/me")).json()["data"]
    (org,) = me["orgs"]
    assert org["id"] == api.account_id == me["id"], me
    source = await deploy(
        api,
        'export default { name: "Ws", version: "0.0.1", props: {}, async run() {} };',
    )
    theirs = await deploy(
        other_api,
        'export default { name: "Other", version: "0.0.1", props: {}, async run() {} };',
    )
    listed = await api.client.get(f"/v1/orgs/{org['id']}/sources", params={"limit": 100})
    ids = [s["id"] for s in listed.json()["data"]]
    assert source["id"] in ids and theirs["id"] not in ids, listed.text
    assert (
        listed.json()
        == (await api.client.get("/v1/users/me/sources", params={"limit": 100})).json()
    )
    linked = await api.client.post(
        "/v1/subscriptions",
        params={"emitter_id": source["id"], "listener_id": source["id"], "event_name": "x"},
    )
    assert linked.status_code == 200, linked.text
    subs = await api.client.get(f"/v1/workspaces/{org['id']}/subscriptions")
    assert subs.json() == (await api.client.get("/v1/users/me/subscriptions")).json()
    assert [s["emitter_id"] for s in subs.json()["data"]] == [source["id"]]
    for path in (
        "/v1/orgs/o_abc123/sources",
        f"/v1/workspaces/{other_api.account_id}/subscriptions",
    ):
        refused = assert_error(await api.client.get(path), 404, "not_found")
        assert api.account_id in refused["error"], refused
