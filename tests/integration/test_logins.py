"""Browser logins on both dialects: passwords, sessions, the keys page, /v1 with the cookie."""

from __future__ import annotations

import secrets

import httpx
import pytest

from sluice import errors
from sluice.api.app import serving
from sluice.clock import FakeClock
from sluice.engine.auth.logins import LOGIN_BURST, Logins
from sluice.platform import Platform
from sluice.web import session as sessions
from tests.conftest import Api


async def test_password_login_sessions_and_logout(platform: Platform) -> None:
    name = f"pw-{secrets.token_hex(3)}"
    account, _ = await platform.create_account(name, f"{name}@example.com")
    logins = platform.logins
    with pytest.raises(errors.InvalidRequest):
        await logins.set_password(account.id, "short")
    await logins.set_password(account.id, "long enough password")
    with pytest.raises(errors.Unauthorized):
        await logins.login(name, "wrong password!")
    with pytest.raises(errors.Unauthorized):
        await logins.login("nobody-at-all", "long enough password")
    token = await logins.login(f"{name}@example.com", "long enough password")
    found = await logins.session_account(token)
    assert found is not None and found.id == account.id
    assert await logins.session_account(token + "x") is None
    await logins.logout(token)
    assert await logins.session_account(token) is None
    # Not a fresh install: no second owner.
    assert not await logins.needs_owner()
    with pytest.raises(errors.Conflict):
        await platform.create_owner("mallory", None, "long enough password")


async def test_named_keys_and_revocation(api: Api) -> None:
    logins = api.platform.logins
    key = await logins.create_key(api.account_id, "  deploy bot ")
    listed = {k.id: k for k in await logins.keys(api.account_id)}
    key_id = key.split("_")[1]
    assert listed[key_id].name == "deploy bot" and listed[key_id].revoked_at is None
    assert await api.platform.authenticate(key) is not None
    await logins.revoke_key(api.account_id, key_id)
    assert await api.platform.authenticate(key) is None
    with pytest.raises(errors.NotFound):
        await logins.revoke_key(api.account_id, key_id)
    with pytest.raises(errors.InvalidRequest):
        await logins.create_key(api.account_id, " ")


async def test_v1_with_the_session_cookie(api: Api) -> None:
    await api.platform.logins.set_password(api.account_id, "long enough password")
    me = (await api.client.get("/v1/users/me")).json()["data"]
    token = await api.platform.logins.login(me["username"], "long enough password")
    transport = httpx.ASGITransport(app=serving(api.platform))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://sluice.test", cookies={sessions.COOKIE: token}
    ) as browser:
        assert (await browser.get("/v1/users/me")).json()["data"]["id"] == api.account_id
        body = {"email": "new@example.com"}
        refused = await browser.put("/v1/users/me", json=body)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
        csrf = {"X-CSRF-Token": sessions.csrf_token(token)}
        foreign = await browser.put(
            "/v1/users/me", json=body, headers={**csrf, "Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        same = await browser.put(
            "/v1/users/me", json=body, headers={**csrf, "Origin": "http://sluice.test"}
        )
        assert same.status_code == 200 and same.json()["data"]["email"] == "new@example.com"
        await api.platform.logins.logout(token)
        assert (await browser.get("/v1/users/me")).status_code == 401


async def test_registry_search(api: Api) -> None:
    found = (await api.client.get("/v1/components/registry", params={"q": "zz-no-such"})).json()
    assert found == {"data": []}
    bad = await api.client.get("/v1/components/registry", params={"type": "widget"})
    assert bad.status_code == 400


async def test_wrong_passwords_are_throttled_per_username_and_address(platform: Platform) -> None:
    """Ten wrong passwords for one username from one address, then one a minute (on a fake
    clock); another address is not locked out, and a right password clears the count."""
    name = f"guess-{secrets.token_hex(3)}"
    account, _ = await platform.create_account(name, None)
    await platform.logins.set_password(account.id, "long enough password")
    clock = FakeClock()
    logins = Logins(platform.db, platform.settings, clock)
    for _ in range(LOGIN_BURST):
        with pytest.raises(errors.Unauthorized):
            await logins.login(name, "wrong password!", client="192.0.2.1")
    with pytest.raises(errors.RateLimited) as refused:
        await logins.login(name.upper(), "long enough password", client="192.0.2.1")
    assert refused.value.retry_after_seconds == 60 and "try again in 60 s" in refused.value.message
    assert await logins.login(name, "long enough password", client="192.0.2.2")
    clock.advance(seconds=60)  # one more try a minute
    with pytest.raises(errors.Unauthorized):
        await logins.login(name, "wrong password!", client="192.0.2.1")
    with pytest.raises(errors.RateLimited):
        await logins.login(name, "long enough password", client="192.0.2.1")
    clock.advance(seconds=60)
    assert await logins.login(name, "long enough password", client="192.0.2.1")
    for _ in range(LOGIN_BURST):  # counted from zero again
        with pytest.raises(errors.Unauthorized):
            await logins.login(name, "wrong password!", client="192.0.2.1")


async def test_the_login_page_answers_429_when_throttled(platform: Platform) -> None:
    name = f"page-{secrets.token_hex(3)}"
    account, _ = await platform.create_account(name, None)
    await platform.logins.set_password(account.id, "long enough password")
    transport = httpx.ASGITransport(app=serving(platform))
    origin = "http://sluice.test"
    async with httpx.AsyncClient(transport=transport, base_url=origin) as browser:
        form = {"username": name, "password": "wrong password!"}
        answers = [
            (await browser.post("/login", data=form, headers={"Origin": origin})).status_code
            for _ in range(LOGIN_BURST + 1)
        ]
        assert answers == [401] * LOGIN_BURST + [429]
        right = {"username": name, "password": "long enough password"}
        last = await browser.post("/login", data=right, headers={"Origin": origin})
        assert last.status_code == 429 and 0 < int(last.headers["retry-after"]) <= 60
        assert "too many wrong passwords" in last.text


async def test_usernames_and_addresses_name_one_account(platform: Platform, api: Api) -> None:
    """A login names an account by username or e-mail: a second account with the same one
    (in either field, in any case) could never log in, and taking another's address locked
    its owner out."""
    name = f"uniq-{secrets.token_hex(3)}"
    first, _ = await platform.create_account(name, f"{name}@example.com")
    for username, email in [
        (name.upper(), None),
        (f"{name}@example.com", None),
        (f"other-{name}", f"{name.upper()}@EXAMPLE.com"),
        (f"other-{name}", name),
    ]:
        with pytest.raises((errors.Conflict, errors.InvalidRequest)):
            await platform.create_account(username, email)
    with pytest.raises(errors.InvalidRequest):
        await platform.create_account(f"x-{name}", "notanemail")
    taken = await api.client.put("/v1/users/me", json={"email": f"{name}@example.com"})
    assert taken.status_code == 409 and taken.json()["field"] == "email", taken.text
    bad = await api.client.put("/v1/users/me", json={"email": "not an address"})
    assert bad.status_code == 400
    mine = await api.client.put("/v1/users/me", json={"email": f"me-{name}@example.com"})
    assert mine.status_code == 200, mine.text
    again = await api.client.put("/v1/users/me", json={"email": f"me-{name}@example.com"})
    assert again.status_code == 200  # its own address is not "taken"
    assert first.email == f"{name}@example.com"


async def test_a_link_followed_before_logging_in_is_where_the_login_goes(
    platform: Platform,
) -> None:
    """The spec's deploy address, opened signed out, came back to the sources list after the
    login: the deploy was lost. Only a path on this server is followed."""
    name = f"next-{secrets.token_hex(3)}"
    account, _ = await platform.create_account(name, None)
    await platform.logins.set_password(account.id, "long enough password")
    transport = httpx.ASGITransport(app=serving(platform))
    origin = "http://sluice.test"
    async with httpx.AsyncClient(transport=transport, base_url=origin) as browser:
        opened = await browser.get("/sources?action=create&key=http-new-requests")
        assert opened.status_code == 303
        assert opened.headers["location"] == (
            "/login?next=%2Fsources%3Faction%3Dcreate%26key%3Dhttp-new-requests"
        )
        form = await browser.get(opened.headers["location"])
        assert 'name="next" value="/sources?action=create&amp;key=http-new-requests"' in form.text
        body = {"username": name, "password": "long enough password"}
        for given, goes_to in [
            ("/sources?action=create&key=http-new-requests", None),
            ("//evil.example/x", "/sources"),
            ("https://evil.example/", "/sources"),
        ]:
            logged_in = await browser.post(
                "/login", data={**body, "next": given}, headers={"Origin": origin}
            )
            assert logged_in.status_code == 303
            assert logged_in.headers["location"] == (goes_to or given)
