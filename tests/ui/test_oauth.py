"""Connecting apps from the browser: an OAuth app against the real authorization server on
loopback (``tests/oauth_server.py``: Authlib, code + PKCE), then a source whose ``run()`` calls
the provider's API with ``this.<app>.$auth.oauth_access_token``; and a key app's fields."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from sluice.clock import SystemClock
from tests import oauth_server
from tests.ui.conftest import Server
from tests.ui.test_sources import api_key, fetch_by_url

SLUG = "loopback"

WHOAMI = """export default {
  name: "Who am I",
  version: "0.0.1",
  props: { http: "$.interface.http", provider: { type: "app", app: "%(slug)s" } },
  async run(event) {
    const token = this.provider.$auth.oauth_access_token;
    const res = await fetch("%(url)s/api/me", { headers: { Authorization: `Bearer ${token}` } });
    const me = await res.json();
    this.$emit({ status: res.status, me }, { summary: `${res.status} me: ${me.login}` });
  },
};
"""


@pytest.fixture(scope="module")
def provider(server: Server) -> Iterator[oauth_server.Provider]:
    # Sluice's callback with no SLUICE_PUBLIC_URL: http://<host>:<port>/oauth/callback.
    with oauth_server.serve(SystemClock(), f"{server.url}/oauth/callback") as running:
        yield running


def register(page: Page, server: Server, body: dict[str, object]) -> None:
    """An app registered by the owner (an admin) through ``POST /v1/apps``."""
    key = api_key(page, f"operator {body['name_slug']}")
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as api:
        made = api.post("/v1/apps", json=body)
    assert made.status_code == 200, made.text


def approve(page: Page) -> None:
    """The provider's consent page (Authlib's grant checked the client, redirect and PKCE)."""
    expect(page.get_by_text(f"Let {oauth_server.CLIENT_ID} read your profile?")).to_be_visible()
    page.get_by_role("button", name="Approve").click()


def test_connect_an_oauth_app_deploy_and_see_its_event(
    page: Page,
    server: Server,
    provider: oauth_server.Provider,
    file_server: tuple[str, dict[str, str]],
) -> None:
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if "//127.0.0.1:" not in r.url else None)
    register(
        page,
        server,
        {
            "name_slug": SLUG,
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
    # From the accounts page: Connect, approve at the provider, back with the account listed.
    page.goto("/accounts")
    page.get_by_role("button", name="Connect Loopback OAuth").click()
    approve(page)
    expect(page).to_have_url(re.compile(r"/accounts\?account_id=apn_\w+&app=loopback$"))
    expect(page.locator("[data-connected]")).to_contain_text("Connected loopback as ada")
    row = page.get_by_role("row").filter(has_text="oauth_access_token")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("as ada")
    account_id = page.url.split("account_id=")[1].split("&")[0]
    assert provider.calls["authorization_code"] == 1

    # From the deploy form's picker: connecting the same provider user again comes back to
    # the form with that (one, updated) account chosen.
    base, files = file_server
    files["/whoami.mjs"] = WHOAMI % {"slug": SLUG, "url": provider.url}
    fetch_by_url(page, base + "/whoami.mjs")
    expect(page.get_by_label("provider")).to_have_value("")
    page.get_by_role("button", name="Connect a loopback account").click()
    approve(page)
    expect(page.get_by_role("heading", name="Deploy Who am I")).to_be_visible()
    expect(page.get_by_label("provider")).to_have_value(account_id)
    page.locator("#name").fill("whoami")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="whoami")).to_be_visible()

    # run() calls the provider's API with the access token Sluice keeps.
    page.get_by_text("Send a test request").click()
    page.get_by_label("JSON body").fill('{"hello": "provider"}')
    page.get_by_role("button", name="Send", exact=True).click()
    row = page.locator("[data-event-rows] tr").first
    expect(row).to_contain_text("200 me: ada")
    row.click()
    expect(page.locator("[data-event-json]")).to_contain_text('"login": "ada"')
    assert outside == []

    # A deployed source's configuration form has the button too, and comes back to it.
    source_url = page.url
    page.get_by_role("button", name="Connect a loopback account").click()
    approve(page)
    expect(page).to_have_url(f"{source_url}?account_id={account_id}&app={SLUG}")
    expect(page.get_by_label("provider")).to_have_value(account_id)

    page.goto("/accounts")
    expect(page.get_by_role("row").filter(has_text="oauth_access_token")).to_have_count(1)


def test_a_key_apps_fields_come_from_the_catalog(page: Page, server: Server) -> None:
    register(
        page,
        server,
        {
            "name_slug": "crm",
            "name": "My CRM",
            "auth_type": "keys",
            "custom_fields": [
                {"name": "api_key", "label": "API Key", "secret": True},
                {"name": "region", "label": "Region", "optional": True},
            ],
        },
    )
    page.goto("/accounts")
    page.locator("[data-app-chooser] select").select_option("crm")
    page.get_by_role("button", name="Show its fields").click()
    expect(page.get_by_role("heading", name="Add a My CRM account")).to_be_visible()
    key = page.get_by_label("API Key")
    expect(key).to_have_attribute("type", "password")
    page.get_by_label("Region").fill("eu")
    key.fill("crm-s3cr3t")
    page.get_by_role("button", name="Save account").click()
    expect(page).to_have_url(re.compile(r"/accounts\?account_id=apn_\w+&app=crm$"))
    # By its app cell: a bare text filter may also match a random account id.
    row = page.get_by_role("row").filter(has=page.get_by_role("cell", name="crm", exact=True))
    expect(row).to_contain_text("api_key")
    expect(row).to_contain_text("region")
    assert "crm-s3cr3t" not in page.content()


@pytest.fixture(scope="module")
def short_lived(server: Server) -> Iterator[oauth_server.Provider]:
    """A provider whose access tokens the test then marks expired in the server's database,
    so the next run refreshes first."""
    with oauth_server.serve(SystemClock(), f"{server.url}/oauth/callback") as running:
        yield running


def expire_token(server: Server, account_id: str) -> None:
    """The account's access token expired (the server keeps its data in SQLite)."""
    with contextlib.closing(sqlite3.connect(server.data_dir / "sluice.db")) as db, db:
        db.execute("UPDATE connected_accounts SET expires_at_ms = 1 WHERE id = ?", (account_id,))


def test_a_refused_refresh_shows_reconnect_and_reconnecting_clears_it(
    page: Page, server: Server, short_lived: oauth_server.Provider
) -> None:
    slug = "shortlived"
    register(
        page,
        server,
        {
            "name_slug": slug,
            "name": "Short-lived",
            "auth_type": "oauth",
            "oauth": {
                "authorize_url": f"{short_lived.url}/authorize",
                "token_url": f"{short_lived.url}/token",
                "user_info_url": f"{short_lived.url}/api/me",
                "scopes": ["profile"],
                "client_id": oauth_server.CLIENT_ID,
                "client_secret": oauth_server.CLIENT_SECRET,
            },
        },
    )
    page.goto("/accounts")
    page.get_by_role("button", name="Connect Short-lived").click()
    approve(page)
    expect(page.locator("[data-connected]")).to_contain_text(f"Connected {slug} as ada")
    account_id = page.url.split("account_id=")[1].split("&")[0]
    short_lived.revoke_refresh_tokens("ada")
    expire_token(server, account_id)

    key = api_key(page, "reconnect")
    code = WHOAMI % {"slug": slug, "url": short_lived.url}
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as api:
        made = api.post(
            "/v1/sources",
            json={
                "component_code": code,
                "configured_props": {"provider": {"authProvisionId": account_id}},
            },
        )
        assert made.status_code == 200, made.text
        source = made.json()["data"]
    page.goto(f"/sources/{source['id']}")
    page.get_by_text("Send a test request").click()
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.locator("[data-log-lines]")).to_contain_text("needs reconnecting")

    page.goto("/accounts")
    row = page.get_by_role("row").filter(has_text=account_id)
    expect(row.locator(".badge")).to_have_text("reconnect needed")
    row.get_by_role("button", name="Reconnect").click()
    approve(page)
    expect(page).to_have_url(re.compile(rf"/accounts\?account_id={account_id}&app={slug}$"))
    row = page.get_by_role("row").filter(has_text=account_id)
    expect(row.locator(".badge")).to_have_text("connected")
    expect(row.get_by_role("button", name="Reconnect")).to_have_count(0)
