"""The app catalog (``/v1/apps``) in Pipedream's shape, an operator's apps, and key apps'
credentials checked against their fields."""

from __future__ import annotations

import json
import secrets

from sluice.domain import apps as app_rules
from sluice.platform import Platform
from tests.conftest import Api, account_client


async def test_the_catalog_lists_the_builtin_apps_as_pipedream_does(api: Api) -> None:
    listed = (await api.client.get("/v1/apps", params={"q": "slack"})).json()
    slugs = [a["name_slug"] for a in listed["data"]]
    assert slugs == ["slack", "slack_bot"] and listed["page_info"]["count"] == 2
    slack = (await api.client.get("/v1/apps/slack")).json()["data"]
    assert slack["id"] == app_rules.builtin_id("slack") and slack["id"].startswith("app_")
    assert slack["auth_type"] == "oauth" and slack["custom_fields_json"] == "[]"
    assert slack["categories"] == ["Communication"] and "img_src" in slack
    # Built in with Slack's public endpoints; nobody can connect until an operator adds a client.
    assert slack["oauth"]["authorize_url"] == "https://slack.com/oauth/v2/authorize"
    assert slack["connectable"] is False and slack["oauth"]["client_secret_set"] is False
    bot = (await api.client.get("/v1/apps/slack_bot")).json()["data"]
    assert json.loads(bot["custom_fields_json"]) == [
        {
            "name": "bot_token",
            "label": "Bot Token",
            "description": None,
            "default": None,
            "optional": None,
            "type": "password",
        }
    ]
    every = {a["name_slug"] for a in (await api.client.get("/v1/apps")).json()["data"]}
    # The apps of the components Sluice ships and imports.
    assert {"http", "helper_functions", "slack"} <= every
    missing = await api.client.get("/v1/apps/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


async def test_only_operators_register_apps_and_secrets_never_come_back(
    api: Api, platform: Platform
) -> None:
    slug = f"crm_{secrets.token_hex(3)}"
    body = {
        "name_slug": slug,
        "name": "My CRM",
        "auth_type": "keys",
        "custom_fields": [
            {"name": "api_key", "label": "API Key", "secret": True},
            {"name": "region", "label": "Region", "optional": True},
        ],
    }
    refused = await api.client.post("/v1/apps", json=body)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    async with account_client(platform, "ops", is_admin=True) as admin:
        created = (await admin.client.post("/v1/apps", json=body)).json()["data"]
        assert created["id"].startswith("app_") and created["builtin"] is False
        fields = json.loads(created["custom_fields_json"])
        assert [(f["name"], f["type"]) for f in fields] == [
            ("api_key", "password"),
            ("region", "string"),
        ]
        again = await admin.client.post("/v1/apps", json=body)
        assert again.status_code == 409
        renamed = await admin.client.put(f"/v1/apps/{slug}", json={"name": "The CRM"})
        assert renamed.json()["data"]["name"] == "The CRM"
        assert renamed.json()["data"]["id"] == created["id"]
        # A built-in edited: only the client is added, Slack's endpoints stay.
        slack = await admin.client.put(
            "/v1/apps/slack",
            json={"oauth": {"client_id": "123.456", "client_secret": "very-secret-value"}},
        )
        assert slack.status_code == 200, slack.text
        data = slack.json()["data"]
        assert "very-secret-value" not in slack.text
        assert data["id"] == app_rules.builtin_id("slack") and data["connectable"] is True
        assert data["oauth"]["token_url"] == "https://slack.com/api/oauth.v2.access"
        assert data["oauth"]["client_secret_set"] is True
        bad = await admin.client.post(
            "/v1/apps", json={"name_slug": "x_y", "name": "X", "auth_type": "oauth"}
        )
        assert bad.status_code == 400 and bad.json()["field"] == "oauth"
    read = await api.client.get("/v1/apps/slack")
    assert "very-secret-value" not in read.text


async def test_key_app_credentials_are_checked_against_its_fields(api: Api) -> None:
    missing = await api.client.post(
        "/v1/accounts", json={"app": "discord_bot", "credentials": {"guild_id": "1"}}
    )
    assert missing.status_code == 400 and missing.json()["field"] == "credentials.bot_token"
    unknown = await api.client.post(
        "/v1/accounts", json={"app": "discord_bot", "credentials": {"bot_token": "t", "x": "1"}}
    )
    assert unknown.status_code == 400 and unknown.json()["field"] == "credentials.x"
    made = await api.client.post(
        "/v1/accounts",
        json={"app": "discord_bot", "name": "bot", "credentials": {"bot_token": "tok-123"}},
    )
    assert made.status_code == 200, made.text
    account = made.json()["data"]
    assert account["credential_fields"] == ["bot_token"] and account["status"] == "ok"
    assert "tok-123" not in made.text
    # An OAuth app is connected through its provider, not with this body.
    oauth = await api.client.post("/v1/apps/discord_bot/connect", json={})
    assert oauth.status_code == 400
    # Slack has no client here yet: the error says who sets it.
    unset = await api.client.post("/v1/apps/github/connect", json={})
    assert unset.status_code == 409 and "client id" in unset.json()["error"]


#: Shaped like Pipedream's "Create a Source" example (the RSS source: an `rss` app prop, a feed
#: URL and a timer, deployed with no account) and helper_functions' actions.
FEED = """
const rss = { type: "app", app: "rss", methods: { auth() { return this.$auth; } } };
export default {
  name: "Feed", version: "0.0.1",
  props: { rss, url: { type: "string" }, timer: { type: "$.interface.timer" } },
  async run() { return { auth: this.rss.auth(), url: this.url }; },
};
"""
HELPER = """
const helper_functions = { type: "app", app: "helper_functions", propDefinitions: {
  pick: { type: "string", async options() { return [JSON.stringify(this.$auth)]; } } } };
export default {
  name: "Pick", key: "pick-helper", version: "0.0.1", type: "action",
  props: { helper_functions, pick: { propDefinition: [helper_functions, "pick"] },
           slack: { type: "app", app: "slack", optional: true } },
  async run() { return { auth: this.helper_functions.$auth, pick: this.pick }; },
};
"""


async def test_apps_without_auth_need_no_connected_account(api: Api) -> None:
    assert (await api.client.get("/v1/apps/rss")).json()["data"]["auth_type"] == "none"
    deployed = await api.client.post(
        "/v1/sources",
        json={
            "component_code": FEED,
            "configured_props": {
                "url": "https://rss.example/feed",
                "timer": {"intervalSeconds": 60},
            },
        },
    )
    assert deployed.status_code == 200, deployed.text
    source = deployed.json()["data"]
    ran = (await api.client.post(f"/v1/sources/{source['id']}/run", json={})).json()["data"]
    assert ran["ok"] and ran["value"] == {"auth": {}, "url": "https://rss.example/feed"}, ran

    saved = await api.client.post("/v1/components", json={"component_code": HELPER})
    assert saved.status_code == 200, saved.text
    for given in ({}, {"helper_functions": {}}):
        listed = await api.client.post(
            "/v1/components/pick-helper/props/pick/options", json={"configured_props": given}
        )
        assert listed.status_code == 200, listed.text
        assert listed.json()["data"]["options"] == ["{}"]
    action = await api.client.post(
        "/v1/actions/run", json={"component_key": "pick-helper", "configured_props": {"pick": "p"}}
    )
    assert action.status_code == 200, action.text
    assert action.json()["data"]["ret"] == {"auth": {}, "pick": "p"}
    workflow = await api.client.post(
        "/v1/workflows",
        json={
            "trigger": {"type": "manual"},
            "steps": [{"name": "pick", "action": "pick-helper", "props": {"pick": "q"}}],
        },
    )
    assert workflow.status_code == 200, workflow.text
    run = await api.client.post(f"/v1/workflows/{workflow.json()['data']['id']}/runs", json={})
    assert run.json()["data"]["steps"][0]["return_value"] == {"auth": {}, "pick": "q"}, run.text
    # An app that authenticates still needs an account of that app.
    slack = await api.client.post(
        "/v1/actions/run",
        json={
            "component_key": "pick-helper",
            "configured_props": {"pick": "p", "slack": {"authProvisionId": "apn_nope"}},
        },
    )
    assert slack.status_code == 400 and slack.json()["field"] == "configured_props.slack"
    required = await api.client.post(
        "/v1/sources",
        json={"component_code": FEED.replace('"rss"', '"slack"'), "configured_props": {"url": "u"}},
    )
    assert required.status_code == 400 and "connected slack account" in required.json()["error"]


#: Shaped like @pipedream/formatting's actions: an app prop of Pipedream's scaffolded app file
#: (its one method logs ``Object.keys(this.$auth)``), no account asked for on Pipedream.
FORMATTING = """
const formatting = { type: "app", app: "formatting", propDefinitions: {},
  methods: { authKeys() { console.log(Object.keys(this.$auth)); } } };
export default {
  name: "Trim Whitespace", key: "formatting-trim-whitespace", version: "0.0.6", type: "action",
  props: { formatting, input: { type: "string", label: "Input" } },
  async run({ $ }) { $.export("$summary", "Trimmed"); return this.input.trim(); },
};
"""


async def test_pipedreams_no_account_apps_are_built_in(api: Api) -> None:
    for slug in ("pipedream_utils", "formatting", "schedule", "emit", "delay", "filter", "email"):
        found = await api.client.get(f"/v1/apps/{slug}")
        assert found.status_code == 200, (slug, found.text)
        app = found.json()["data"]
        assert (app["auth_type"], app["builtin"], app["id"]) == (
            "none",
            True,
            app_rules.builtin_id(slug),
        ), app
    ran = await api.client.post(
        "/v1/actions/run",
        json={"component_code": FORMATTING, "configured_props": {"input": "  padded  "}},
    )
    assert ran.status_code == 200, ran.text
    assert ran.json()["data"]["ret"] == "padded" and ran.json()["data"]["summary"] == "Trimmed"
