"""Every kind of invocation reads fresh OAuth tokens: a prop's async options, a deploy hook,
an action run; and fails clearly when the account needs reconnecting. The provider and
fixtures are test_managed_auth's (a real Authlib server on loopback, a fake clock)."""

from __future__ import annotations

from tests.conftest import Api
from tests.integration import test_managed_auth
from tests.integration.test_managed_auth import HOUR, Env, connect, run_source

# The same module-scoped fixtures: a platform on a fake clock, the provider, a registered app.
env = test_managed_auth.env
user = test_managed_auth.user


OPTIONS = """
const app = {
  type: "app",
  app: "%(slug)s",
  propDefinitions: {
    who: { type: "string", async options() { return [this.$auth.oauth_access_token]; } },
  },
};
export default {
  name: "Pick", version: "0.0.1",
  props: { provider: app, who: { propDefinition: [app, "who"] } },
  async run() {},
};
"""


async def test_async_options_read_the_fresh_token(env: Env, user: Api) -> None:
    account = await connect(env, user, "ola")
    saved = await user.client.post(
        "/v1/components", json={"component_code": OPTIONS % {"slug": env.slug}}
    )
    assert saved.status_code == 200, saved.text
    component = saved.json()["data"]["id"]
    body = {"configured_props": {"provider": {"authProvisionId": account["id"]}}}
    url = f"/v1/components/{component}/props/who/options"
    first = (await user.client.post(url, json=body)).json()["data"]["options"]
    before = env.provider.calls["refresh_token"]
    env.clock.advance(seconds=HOUR + 1)
    second = (await user.client.post(url, json=body)).json()["data"]["options"]
    assert env.provider.calls["refresh_token"] == before + 1
    assert second != first and env.provider.token_by(access_token=second[0]) is not None


HOOKED = """
export default {
  name: "Hooked", version: "0.0.1",
  props: { provider: { type: "app", app: "%(slug)s" }, db: "$.service.db" },
  hooks: { async deploy() { this.db.set("token", this.provider.$auth.oauth_access_token); } },
  async run() { return this.db.get("token"); },
};
"""

ACTION = """
export default {
  name: "Act", key: "act", version: "0.0.1", type: "action",
  props: { provider: { type: "app", app: "%(slug)s" } },
  async run() { return this.provider.$auth.oauth_access_token; },
};
"""


async def test_hooks_and_actions_get_fresh_tokens_or_a_clear_error(env: Env, user: Api) -> None:
    account = await connect(env, user, "ivy")
    props = {"provider": {"authProvisionId": account["id"]}}
    env.clock.advance(seconds=HOUR + 1)
    hooked = await user.client.post(
        "/v1/sources",
        json={"component_code": HOOKED % {"slug": env.slug}, "configured_props": props},
    )
    assert hooked.status_code == 200, hooked.text  # the deploy hook refreshed the token
    token = (await run_source(user, hooked.json()["data"]["id"]))["value"]
    assert token != account["id"] and env.provider.token_by(access_token=token) is not None
    action = {"component_code": ACTION % {"slug": env.slug}, "configured_props": props}
    ran = await user.client.post("/v1/actions/run", json=action)
    assert ran.json()["data"]["ret"] == token

    env.provider.revoke_refresh_tokens("ivy")
    env.clock.advance(seconds=HOUR + 1)
    refused = await user.client.post(
        "/v1/sources",
        json={"component_code": HOOKED % {"slug": env.slug}, "configured_props": props},
    )
    assert refused.status_code == 400 and refused.json()["code"] == "hook_failed"
    assert "needs reconnecting" in refused.json()["error"]
    ran = await user.client.post("/v1/actions/run", json=action)
    assert ran.status_code == 409 and ran.json()["code"] == "reconnect_needed"
    assert account["id"] in ran.json()["error"]
