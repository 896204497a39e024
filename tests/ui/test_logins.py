"""First run, login, logout, CSRF, API keys: in a real browser on a real server."""

from __future__ import annotations

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.ui.conftest import PASSWORD, Server, create_owner, run_cli, serve


def test_first_visit_creates_the_owner_then_login_logout(browser: Browser, tmp_path) -> None:
    with serve(tmp_path) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        page.goto("/")
        expect(page).to_have_url(f"{server.url}/setup")
        # A too-short password is refused on its field (the browser's minlength is bypassed).
        page.get_by_label("Username").fill("ada")
        page.get_by_label("Password", exact=True).evaluate("e => e.removeAttribute('minlength')")
        page.get_by_label("Password again").evaluate("e => e.removeAttribute('minlength')")
        page.get_by_label("Password", exact=True).fill("short")
        page.get_by_label("Password again").fill("short")
        page.get_by_role("button", name="Create the owner account").click()
        expect(page.get_by_role("alert")).to_contain_text("at least 8 characters")
        create_owner(page)
        cookie = next(c for c in context.cookies() if c["name"] == "sluice_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
        # The first-run page is gone once the owner exists.
        page.goto("/setup")
        expect(page).to_have_url(f"{server.url}/sources")

        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{server.url}/login")
        page.goto("/sources")  # signed out: the login, then back to the page asked for
        expect(page).to_have_url(f"{server.url}/login?next=%2Fsources")
        page.get_by_label("Username or e-mail").fill("ada@example.com")
        page.get_by_label("Password").fill("wrong password")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_have_text("wrong username, e-mail or password")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()
        context.close()


def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused(
    page: Page, server: Server
) -> None:
    page.goto("/settings/keys")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    with httpx.Client(base_url=server.url, cookies=cookies) as client:
        no_token = client.post("/settings/keys", data={"name": "forged"})
        assert no_token.status_code == 403 and "CSRF" in no_token.text
        token = page.locator("input[name=csrf_token]").first.get_attribute("value")
        foreign = client.post(
            "/settings/keys",
            data={"name": "forged", "csrf_token": token},
            headers={"Origin": "https://evil.example"},
        )
        assert foreign.status_code == 403 and "cross-origin" in foreign.text
        # /v1 with the cookie: reads work, writes need the header.
        assert client.get("/v1/users/me").json()["data"]["username"] == "ada"
        assert client.post("/v1/components", json={"component_code": "x"}).status_code == 403
    # In the page itself, the same form works.
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_text("New key laptop")).to_be_visible()
    expect(page.get_by_role("cell", name="forged")).to_have_count(0)


def test_api_keys_are_shown_once_and_can_be_revoked(page: Page, server: Server) -> None:
    page.goto("/settings/keys")
    page.get_by_label("Name").fill("ci")
    page.get_by_role("button", name="Create key").click()
    key = page.locator("#new-key").inner_text()
    assert key.startswith("slk_")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as api:
        assert api.get("/v1/users/me").status_code == 200
        page.goto("/settings/keys")
        expect(page.locator("#new-key")).to_have_count(0)  # never shown again
        assert key not in page.content()
        # By its name cell: a text filter "ci" also matched a random key id holding "ci".
        row = page.get_by_role("row").filter(has=page.get_by_role("cell", name="ci", exact=True))
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Revoke").click()
        expect(row).to_contain_text("revoked")
        assert api.get("/v1/users/me").status_code == 401


def test_accounts_create_with_a_password_logs_in(browser: Browser, server: Server) -> None:
    run_cli(
        "accounts",
        "create",
        "--name",
        "grace",
        "--password",
        data_dir=server.data_dir,
        stdin="grace's password\ngrace's password\n",
    )
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/login")
    page.get_by_label("Username or e-mail").fill("grace")
    page.get_by_label("Password").fill("grace's password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("nav .who")).to_contain_text("grace")
    # Another account's data is not hers: the owner's default error workflow is not listed.
    page.goto("/workflows")
    expect(page.get_by_role("link", name="Global error workflow")).to_have_count(1)
    context.close()


def test_environment_variables_are_set_listed_and_deleted(page: Page) -> None:
    page.goto("/workflows")
    # In the sidebar (issue 26: it was only a link on the Settings page).
    page.get_by_role("navigation", name="Main").get_by_role(
        "link", name="Environment variables"
    ).click()
    page.get_by_label("Name").fill("UI_TOKEN")
    page.get_by_label("Value").fill("ui-s3cret")
    page.get_by_role("button", name="Set").click()
    row = page.locator("tbody tr").filter(has=page.locator("code", has_text="UI_TOKEN"))
    expect(row).to_have_count(1)
    assert "ui-s3cret" not in page.content()  # never shown again
    page.get_by_label("Name").fill("1BAD")
    page.get_by_label("Name").evaluate("e => e.removeAttribute('pattern')")
    page.get_by_role("button", name="Set").click()
    expect(page.locator(".field-error")).to_contain_text("letters, digits and _")
    page.once("dialog", lambda d: d.accept())
    row.get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No environment variables yet.")).to_be_visible()
