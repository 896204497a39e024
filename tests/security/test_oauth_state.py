"""The OAuth ``state`` of a connection the web UI starts is bound to the browser session that
started it (issue 25). Before, the UI's Connect sent the browser to Sluice's start link, and
whichever browser opened that link first (one it leaked to: a log, a shared screen, a
history) was bound instead, approved with its own provider account and connected it to the
victim's Sluice account. Now the UI's connection is bound when it starts, its link is the
provider's URL, and only the starting browser's callback finishes it.

API-started connections (an API key, the CLI) keep the documented rule: the start link is
bound to the first browser that confirms it (tests/integration/test_managed_auth.py).
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import AsyncIterator

import pytest_asyncio

from sluice.platform import Platform
from sluice.web import session as sessions
from tests.conftest import account_client
from tests.integration.test_managed_auth import PUBLIC, Env, browser, consent, oauth_env


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    async with oauth_env(platform) as made:
        yield made


async def _follow_as_a_browser(env: Env, url: str, who: str) -> int:
    """Another browser given ``url`` does all a browser can with it: opens Sluice's start
    link and confirms, approves at the provider as ``who``, follows the redirect back. The
    status of Sluice's answer to that redirect."""
    async with browser(env) as other:
        if url.startswith(PUBLIC):
            path = url.removeprefix(PUBLIC)
            asked = await other.get(path)
            if asked.status_code == 200 and "Continue to" in asked.text:
                state = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["state"][0]
                went = await other.post(
                    "/oauth/start", data={"state": state}, headers={"Origin": PUBLIC}
                )
                url = went.headers.get("location", "")
        if not url.startswith(env.provider.url):
            return 400  # it got no further than Sluice
        callback = await consent(url, who)
        return (await other.get(callback)).status_code


async def test_a_connection_the_web_ui_starts_finishes_only_in_that_browser(env: Env) -> None:
    async with account_client(env.platform, f"victim-{secrets.token_hex(3)}") as victim:
        account = await env.platform.authenticate(victim.api_key)
        assert account is not None
        await env.platform.logins.set_password(account.id, "a long enough password")
        session = await env.platform.logins.login(account.username, "a long enough password")
        async with browser(env, session) as mine:
            started = await mine.post(
                "/accounts/connect",
                data={"app": env.slug, "csrf_token": sessions.csrf_token(session)},
                headers={"HX-Request": "true", "Origin": PUBLIC},
            )
            assert started.status_code == 204, started.text
            url = started.headers["hx-redirect"]

            # Someone else with the same URL cannot connect their provider account to it.
            assert await _follow_as_a_browser(env, url, "mallory") == 400
            assert (await victim.client.get("/v1/accounts")).json()["data"] == []

            # The browser that started it finishes it.
            if url.startswith(PUBLIC):  # (before issue 25: the start link, opened already)
                url = (await mine.get(url.removeprefix(PUBLIC))).headers.get("location", url)
            assert url.startswith(env.provider.url), url
            finished = await mine.get(await consent(url, "ada"))
            assert finished.status_code == 303, finished.text
        [connected] = (await victim.client.get("/v1/accounts")).json()["data"]
        assert connected["app"] == env.slug
