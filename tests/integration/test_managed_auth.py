"""OAuth 2 connect and fresh tokens, against a real authorization server on loopback
(``tests/oauth_server.py``: Authlib, code + PKCE, rotating refresh tokens).

A platform with a fake clock shares the suite's database; the provider reads the same clock,
so tokens expire when a test moves it. The browser's part (consent, redirect) is httpx
following the provider's pages; Sluice's callback is called as the redirect names it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio

from sluice.clock import FakeClock, SystemClock
from sluice.platform import Platform
from tests import oauth_server
from tests.conftest import Api, account_client

PUBLIC = "http://sluice.test"
HOUR = 3600


@dataclass
class Env:
    platform: Platform
    clock: FakeClock
    provider: oauth_server.Provider
    slug: str


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    clock = FakeClock(SystemClock().now_ms())
    # User code may reach the provider's API on loopback (docs/runtime.md, egress).
    settings = dataclasses.replace(platform.settings, public_url=PUBLIC, egress_allow="127.0.0.1:*")
    with oauth_server.serve(clock, PUBLIC + "/oauth/callback") as provider:
        async with Platform.open(settings, clock=clock, background=False) as opened:
            slug = f"loopback_{secrets.token_hex(3)}"
            async with account_client(opened, "operator", is_admin=True) as admin:
                made = await admin.client.post(
                    "/v1/apps",
                    json={
                        "name_slug": slug,
                        "name": "Loopback OAuth",
                        "auth_type": "oauth",
                        "oauth": {
                            "authorize_url": f"{provider.url}/authorize",
                            "token_url": f"{provider.url}/token",
                            "user_info_url": f"{provider.url}/api/me",
                            "scopes": ["profile"],
                            "client_id": oauth_server.CLIENT_ID,
                            "client_secret": oauth_server.CLIENT_SECRET,
                        },
                    },
                )
                assert made.status_code == 200, made.text
            yield Env(opened, clock, provider, slug)


@pytest_asyncio.fixture(loop_scope="session")
async def user(env: Env) -> AsyncIterator[Api]:
    async with account_client(env.platform, f"user-{secrets.token_hex(3)}") as api:
        yield api


async def approve(env: Env, api: Api, who: str = "ada", **body: Any) -> httpx.Response:
    """Start a connection and approve it on the provider's page as ``who``: Sluice's answer
    to the provider's redirect."""
    started = await api.client.post(f"/v1/apps/{env.slug}/connect", json=body)
    assert started.status_code == 200, started.text
    url = started.json()["data"]["authorize_url"]
    async with httpx.AsyncClient() as browser:
        consent = await browser.get(url)
        assert consent.status_code == 200 and "Approve" in consent.text, consent.text
        approved = await browser.post(url, data={"confirm": "yes", "user": who})
    assert approved.status_code == 302, approved.text
    location = approved.headers["location"]
    assert location.startswith(PUBLIC + "/oauth/callback?")
    return await api.client.get(location.removeprefix(PUBLIC))


async def connect(env: Env, api: Api, who: str = "ada") -> dict[str, Any]:
    page = await approve(env, api, who)
    assert page.status_code == 200, page.text
    accounts = (await api.client.get("/v1/accounts", params={"app": env.slug})).json()["data"]
    found = [a for a in accounts if a["oauth_uid"] == who]
    assert len(found) == 1
    return found[0]


WHOAMI = """
export default {
  name: "Who am I",
  version: "0.0.1",
  props: { provider: { type: "app", app: "%(slug)s" } },
  async run() {
    const token = this.provider.$auth.oauth_access_token;
    const res = await fetch("%(url)s/api/me", { headers: { Authorization: `Bearer ${token}` } });
    return { status: res.status, me: await res.json(), token, uid: this.provider.$auth.oauth_uid };
  },
};
"""


async def deploy_whoami(env: Env, api: Api, account_id: str) -> str:
    code = WHOAMI % {"slug": env.slug, "url": env.provider.url}
    made = await api.client.post(
        "/v1/sources",
        json={
            "component_code": code,
            "configured_props": {"provider": {"authProvisionId": account_id}},
        },
    )
    assert made.status_code == 200, made.text
    source_id: str = made.json()["data"]["id"]
    return source_id


async def run_source(api: Api, source_id: str) -> dict[str, Any]:
    ran = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": {}})
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


async def test_code_and_pkce_flow_connects_once_per_provider_user(env: Env, user: Api) -> None:
    started = await user.client.post(f"/v1/apps/{env.slug}/connect", json={})
    query = urllib.parse.parse_qs(
        urllib.parse.urlsplit(started.json()["data"]["authorize_url"]).query
    )
    assert query["code_challenge_method"] == ["S256"] and query["state"][0]
    assert query["redirect_uri"] == [PUBLIC + "/oauth/callback"]
    for elsewhere in ("//evil.example/x", "/\\evil.example", "https://evil.example/"):
        refused = await user.client.post(
            f"/v1/apps/{env.slug}/connect", json={"return_to": elsewhere}
        )
        assert refused.status_code == 400 and refused.json()["field"] == "return_to"

    page = await approve(env, user, "ada", name="work")
    assert page.status_code == 200 and "Connected" in page.text and "<script" not in page.text
    assert "script-src" not in page.headers["content-security-policy"]
    account = await connect(env, user, "ada")  # the same provider user again
    accounts = (await user.client.get("/v1/accounts")).json()["data"]
    assert [a["id"] for a in accounts] == [account["id"]]  # updated, never duplicated
    assert account["name"] == "work" and account["status"] == "ok"
    assert account["credential_fields"] == sorted(
        ["oauth_access_token", "oauth_refresh_token", "oauth_uid", "oauth_client_id"]
    )
    assert account["expires_at"] == env.clock.now_ms() // 1000 + HOUR
    other = await connect(env, user, "grace")
    assert other["id"] != account["id"]
    # A connection started with return_to ends on that page with the account's id.
    back = await approve(env, user, "ada", return_to="/accounts?tab=apps")
    assert back.status_code == 303
    assert back.headers["location"] == (
        f"/accounts?tab=apps&account_id={account['id']}&app={env.slug}"
    )


async def test_a_forged_state_and_a_replayed_code_are_refused(env: Env, user: Api) -> None:
    forged = await user.client.get("/oauth/callback", params={"code": "x", "state": "forged"})
    assert forged.status_code == 400 and "state" in forged.text
    started = await user.client.post(f"/v1/apps/{env.slug}/connect", json={})
    url = started.json()["data"]["authorize_url"]
    async with httpx.AsyncClient() as browser:
        approved = await browser.post(url, data={"confirm": "yes", "user": "eve"})
    callback = approved.headers["location"].removeprefix(PUBLIC)
    first = await user.client.get(callback)
    assert first.status_code == 200
    replayed = await user.client.get(callback)  # the same redirect again
    assert replayed.status_code == 400
    # The same code under a fresh state: the provider refuses a code used once.
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)["code"][0]
    fresh = await user.client.post(f"/v1/apps/{env.slug}/connect", json={})
    state = urllib.parse.parse_qs(
        urllib.parse.urlsplit(fresh.json()["data"]["authorize_url"]).query
    )["state"][0]
    reused = await user.client.get("/oauth/callback", params={"code": code, "state": state})
    assert reused.status_code == 400 and "invalid_grant" in reused.text
    denied = await approve_denied(env, user)
    assert denied.status_code == 400 and "access_denied" in denied.text
    accounts = (await user.client.get("/v1/accounts")).json()["data"]
    assert len(accounts) == 1


async def approve_denied(env: Env, api: Api) -> httpx.Response:
    started = await api.client.post(f"/v1/apps/{env.slug}/connect", json={})
    url = started.json()["data"]["authorize_url"]
    async with httpx.AsyncClient() as browser:
        denied = await browser.post(url, data={"confirm": "no", "user": "eve"})
    return await api.client.get(denied.headers["location"].removeprefix(PUBLIC))


async def test_a_component_keeps_working_across_token_expiry(env: Env, user: Api) -> None:
    account = await connect(env, user, "lin")
    source_id = await deploy_whoami(env, user, account["id"])
    first = await run_source(user, source_id)
    assert first["ok"], first
    assert first["value"]["status"] == 200 and first["value"]["me"]["id"] == "lin"
    assert first["value"]["uid"] == "lin"
    before = env.provider.calls["refresh_token"]
    token = env.provider.token_by(access_token=first["value"]["token"])
    assert token is not None

    env.clock.advance(seconds=HOUR + 1)  # expired at the provider too
    second = await run_source(user, source_id)
    assert second["ok"] and second["value"]["status"] == 200, second
    assert second["value"]["token"] != first["value"]["token"]
    assert env.provider.calls["refresh_token"] == before + 1
    assert token.refresh_revoked  # rotated: the old refresh token is gone at the provider

    again = await run_source(user, source_id)  # fresh: no refresh
    assert again["value"]["token"] == second["value"]["token"]
    assert env.provider.calls["refresh_token"] == before + 1
    env.clock.advance(seconds=HOUR - 60)  # within the margin: refreshed before it expires
    third = await run_source(user, source_id)
    assert third["ok"] and third["value"]["token"] != second["value"]["token"]
    assert env.provider.calls["refresh_token"] == before + 2  # with the rotated token


async def test_concurrent_runs_refresh_once(env: Env, user: Api) -> None:
    account = await connect(env, user, "kim")
    source_id = await deploy_whoami(env, user, account["id"])
    await run_source(user, source_id)  # the worker is warm
    before = env.provider.calls["refresh_token"]
    env.clock.advance(seconds=HOUR + 1)
    results = await asyncio.gather(*(run_source(user, source_id) for _ in range(6)))
    assert env.provider.calls["refresh_token"] == before + 1
    assert all(r["ok"] and r["value"]["status"] == 200 for r in results), results
    assert len({r["value"]["token"] for r in results}) == 1


async def test_two_processes_refresh_once(env: Env, user: Api) -> None:
    """Another process on the same database (its own engine and lock) refreshing at the same
    moment: the lease on the account's row lets one of them call the provider."""
    account = await connect(env, user, "mo")
    before = env.provider.calls["refresh_token"]
    env.provider.arrived.clear()
    env.provider.release.clear()
    env.provider.hold = True
    async with Platform.open(env.platform.settings, clock=env.clock, background=False) as other:
        try:
            env.clock.advance(seconds=HOUR - 10)  # expiring soon, still valid
            first = asyncio.create_task(
                env.platform.credentials.auth(user.account_id, account["id"])
            )
            assert await asyncio.to_thread(env.provider.arrived.wait, 30)
            # The first holds the lease while the provider answers: the other process uses
            # the token it has, still valid, without a second refresh.
            current = await other.credentials.auth(user.account_id, account["id"])
            assert current is not None and env.provider.calls["refresh_token"] == before + 1
            # Expired now, the first's lease (30 s) still held: the other process waits.
            env.clock.advance(seconds=15)
            waiting = asyncio.create_task(other.credentials.auth(user.account_id, account["id"]))
            env.provider.release.set()
            fresh, after_wait = await first, await waiting
        finally:
            env.provider.hold = False
            env.provider.release.set()
    assert fresh is not None and after_wait is not None
    assert fresh[1]["oauth_access_token"] != current[1]["oauth_access_token"]
    assert after_wait[1] == fresh[1]
    assert env.provider.calls["refresh_token"] == before + 1


STEP = """
export default defineComponent({
  props: { provider: { type: "app", app: "%(slug)s" } },
  async run() { return this.provider.$auth.oauth_access_token.length; },
});
"""


async def test_a_revoked_refresh_token_asks_for_reconnection(env: Env, user: Api) -> None:
    account = await connect(env, user, "zed")
    source_id = await deploy_whoami(env, user, account["id"])
    workflow = await user.client.post(
        "/v1/workflows",
        json={
            "name": "uses auth",
            "trigger": {"type": "manual"},
            "steps": [
                {
                    "name": "token",
                    "code": STEP % {"slug": env.slug},
                    "props": {"provider": {"authProvisionId": account["id"]}},
                }
            ],
        },
    )
    assert workflow.status_code == 200, workflow.text
    wf = workflow.json()["data"]
    env.provider.revoke_refresh_tokens("zed")
    env.clock.advance(seconds=HOUR + 1)

    failed = await run_source(user, source_id)
    assert not failed["ok"] and failed["error"]["code"] == "reconnect_needed"
    assert account["id"] in failed["error"]["message"]
    marked = (await user.client.get(f"/v1/accounts/{account['id']}")).json()["data"]
    assert marked["status"] == "reconnect_needed" and "invalid_grant" in marked["reconnect_reason"]
    errors = await user.client.get(
        f"/v1/sources/{source_id}/event_summaries",
        params={"event_name": "$errors", "expand": "event"},
    )
    events = errors.json()["data"]
    assert events and events[0]["event"]["error"]["code"] == "reconnect_needed"

    ran = await user.client.post(f"/v1/workflows/{wf['id']}/runs", json={"event": {}})
    run = ran.json()["data"]
    assert run["status"] == "error" and run["error"]["code"] == "reconnect_needed"
    assert run["error"]["cellId"] == wf["steps"][0]["id"] and account["id"] in run["error"]["msg"]
    summaries = await user.client.get(
        f"/v1/workflows/{wf['id']}/$errors/event_summaries", params={"expand": "event"}
    )
    assert summaries.json()["data"][0]["event"]["error"]["code"] == "reconnect_needed"

    calls = env.provider.calls["refresh_token"]
    await run_source(user, source_id)  # marked: the provider is not asked again
    assert env.provider.calls["refresh_token"] == calls
    again = await connect(env, user, "zed")  # reconnecting fixes the same account
    assert again["id"] == account["id"] and again["status"] == "ok"
    healed = await run_source(user, source_id)
    assert healed["ok"] and healed["value"]["status"] == 200, healed
