"""OAuth 2 connect and fresh tokens, against a real authorization server on loopback
(``tests/oauth_server.py``: Authlib, code + PKCE, rotating refresh tokens).

A platform with a fake clock shares the suite's database; the provider reads the same clock,
so tokens expire when a test moves it. The browser's part (consent, redirect) is httpx
following the provider's pages; Sluice's start link and callback are called by the API client,
whose cookie jar stands for the browser the connection is bound to.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import secrets
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio

from sluice.api.app import serving
from sluice.clock import FakeClock, SystemClock
from sluice.engine.outbound import tls
from sluice.platform import Platform
from tests import oauth_server
from tests.conftest import Api, account_client

PUBLIC = "http://sluice.test"
#: The API client's origin (conftest's ``account_client``), as its browser form would send it.
ORIGIN = "http://sluice.test"
HOUR = 3600


@dataclass
class Env:
    platform: Platform
    clock: FakeClock
    provider: oauth_server.Provider
    slug: str


@contextlib.asynccontextmanager
async def oauth_env(
    platform: Platform, token_seconds: int = oauth_server.ACCESS_TOKEN_SECONDS
) -> AsyncIterator[Env]:
    """A platform on a fake clock with an OAuth app of the loopback provider, whose access
    tokens live ``token_seconds``."""
    clock = FakeClock(SystemClock().now_ms())
    # User code may reach the provider's API on loopback (docs/runtime.md, egress).
    settings = dataclasses.replace(platform.settings, public_url=PUBLIC, egress_allow="127.0.0.1:*")
    with oauth_server.serve(clock, PUBLIC + "/oauth/callback", token_seconds) as provider:
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


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    async with oauth_env(platform) as made:
        yield made


@pytest_asyncio.fixture(loop_scope="session")
async def user(env: Env) -> AsyncIterator[Api]:
    async with account_client(env.platform, f"user-{secrets.token_hex(3)}") as api:
        yield api


async def open_link(api: Api, link: str) -> str:
    """A browser opens Sluice's start link and continues: the provider's authorize URL it is
    sent on to (and the browser's cookie is set)."""
    assert link.startswith(PUBLIC + "/oauth/start?"), link
    asked = await api.client.get(link.removeprefix(PUBLIC))
    assert asked.status_code == 200 and "Continue to" in asked.text, asked.text
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["state"][0]
    went = await api.client.post("/oauth/start", data={"state": state}, headers={"Origin": ORIGIN})
    assert went.status_code == 303, went.text
    return went.headers["location"]


async def provider_url(env: Env, api: Api, **body: Any) -> str:
    """Start a connection and open its link: the provider's authorize URL."""
    started = await api.client.post(f"/v1/apps/{env.slug}/connect", json=body)
    assert started.status_code == 200, started.text
    return await open_link(api, started.json()["data"]["authorize_url"])


async def consent(url: str, who: str, confirm: str = "yes") -> str:
    """The provider's consent, given as ``who``: the callback it redirects to (a path)."""
    async with httpx.AsyncClient(verify=tls.context()) as browser:
        page = await browser.get(url)
        assert page.status_code == 200 and "Approve" in page.text, page.text
        approved = await browser.post(url, data={"confirm": confirm, "user": who})
    assert approved.status_code == 302, approved.text
    location = approved.headers["location"]
    assert location.startswith(PUBLIC + "/oauth/callback?")
    return location.removeprefix(PUBLIC)


async def approve(env: Env, api: Api, who: str = "ada", **body: Any) -> httpx.Response:
    """Start a connection, open its link and approve it on the provider's page as ``who``:
    Sluice's answer to the provider's redirect."""
    return await api.client.get(await consent(await provider_url(env, api, **body), who))


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
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(await provider_url(env, user)).query)
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
    callback = await consent(await provider_url(env, user), "eve")
    first = await user.client.get(callback)
    assert first.status_code == 200
    replayed = await user.client.get(callback)  # the same redirect again
    assert replayed.status_code == 400
    # The same code under a fresh state: the provider refuses a code used once.
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)["code"][0]
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(await provider_url(env, user)).query)[
        "state"
    ][0]
    reused = await user.client.get("/oauth/callback", params={"code": code, "state": state})
    assert reused.status_code == 400 and "invalid_grant" in reused.text
    denied = await approve_denied(env, user)
    assert denied.status_code == 400 and "access_denied" in denied.text
    accounts = (await user.client.get("/v1/accounts")).json()["data"]
    assert len(accounts) == 1


async def approve_denied(env: Env, api: Api) -> httpx.Response:
    return await api.client.get(await consent(await provider_url(env, api), "eve", "no"))


@contextlib.asynccontextmanager
async def browser(env: Env, session: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """Another browser on Sluice: no API key, its own cookies (a web UI session, if given)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(env.platform)),
        base_url=PUBLIC,
        cookies={"sluice_session": session} if session else None,
    ) as client:
        yield client


async def start_link(env: Env, api: Api) -> tuple[str, str]:
    started = await api.client.post(f"/v1/apps/{env.slug}/connect", json={})
    link = started.json()["data"]["authorize_url"]
    return link.removeprefix(PUBLIC), urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)[
        "state"
    ][0]


async def test_a_connection_finishes_only_in_the_browser_it_was_opened_in(
    env: Env, user: Api
) -> None:
    callback = await consent(await provider_url(env, user), "noor")
    # The provider's redirect, followed in a browser the link was never opened in (an
    # authorize URL that leaked and was approved by someone else), or with another cookie.
    async with browser(env) as other:
        refused = await other.get(callback)
        other.cookies.set("sluice_oauth", "x" * 43, domain="sluice.test", path="/oauth")
        forged = await other.get(callback)
    for answer in (refused, forged):
        assert answer.status_code == 400 and "another browser" in answer.text, answer.text
    assert (await user.client.get("/v1/accounts")).json()["data"] == []
    # Nothing was used up: the browser it was opened in finishes it.
    finished = await user.client.get(callback)
    assert finished.status_code == 200 and "Connected" in finished.text, finished.text


async def test_a_start_link_says_whose_it_is_and_opens_once(env: Env, user: Api) -> None:
    link, state = await start_link(env, user)
    async with browser(env) as first, browser(env) as second:
        asked = await first.get(link)
        assert asked.status_code == 200, asked.text
        account = await env.platform.authenticate(user.api_key)
        assert account is not None
        assert f"to the Sluice account {account.username}." in asked.text
        assert "Loopback OAuth" in asked.text and "<script" not in asked.text
        action = re.search(r"<form method=post action=([^ >]+)>", asked.text)
        assert action is not None  # where the page's button posts, from the link's URL
        assert urllib.parse.urljoin(PUBLIC + link, action[1]) == PUBLIC + "/oauth/start"
        # A form on another site cannot open it for the browser.
        across = await first.post(
            "/oauth/start", data={"state": state}, headers={"Origin": "http://evil.example"}
        )
        assert across.status_code == 403
        went = await first.post("/oauth/start", data={"state": state}, headers={"Origin": PUBLIC})
        assert went.status_code == 303 and went.headers["location"].startswith(env.provider.url)
        # Once: the link does not open in a second browser, nor again in the first.
        for client in (second, first):
            again = await client.get(link)
            assert again.status_code == 400 and "opened already" in again.text, again.text
        late = await second.post("/oauth/start", data={"state": state}, headers={"Origin": PUBLIC})
        assert late.status_code == 400


async def test_a_browser_signed_in_to_the_web_ui_is_not_asked_or_is_refused(
    env: Env, user: Api
) -> None:
    account = await env.platform.authenticate(user.api_key)
    assert account is not None
    await env.platform.logins.set_password(account.id, "a long enough password")
    mine = await env.platform.logins.login(account.username, "a long enough password")
    async with account_client(env.platform, f"other-{secrets.token_hex(3)}") as other:
        await env.platform.logins.set_password(other.account_id, "another long password")
        other_account = await env.platform.authenticate(other.api_key)
        assert other_account is not None
        theirs = await env.platform.logins.login(other_account.username, "another long password")
    link, _state = await start_link(env, user)
    async with browser(env, theirs) as signed_in_elsewhere:
        refused = await signed_in_elsewhere.get(link)
    assert refused.status_code == 403 and account.username in refused.text, refused.text
    async with browser(env, mine) as signed_in:
        went = await signed_in.get(link)  # the web UI's own Connect: no question asked
    assert went.status_code == 303 and went.headers["location"].startswith(env.provider.url)


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
