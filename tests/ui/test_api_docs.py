"""/docs: the routes grouped by resource, each answer's shape, and Authorize with an API key
(tried from a browser that is not logged in)."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from tests.ui.conftest import Server
from tests.ui.test_sources import api_key


def test_grouped_routes_answer_shapes_and_authorize(
    page: Page, browser: Browser, server: Server
) -> None:
    key = api_key(page, "docs")
    context = browser.new_context(base_url=server.url)  # no session: only the key
    docs = context.new_page()
    docs.goto("/docs")
    for group in ("Sources", "Components", "Workflows", "Data stores", "Webhooks"):
        expect(docs.locator(".opblock-tag", has_text=group).first).to_be_visible(timeout=15000)
    assert docs.locator(".opblock-tag", has_text="default").count() == 0

    me = docs.locator(".opblock-get").filter(
        has=docs.locator(".opblock-summary-path[data-path='/v1/users/me']")
    )
    expect(me.locator(".opblock-summary")).to_be_visible()
    me.locator(".opblock-summary").click()
    # The answer's shape, not {"additionalProp1": {}}.
    expect(me.locator(".responses-wrapper")).to_contain_text("is_admin")

    docs.get_by_role("button", name="Authorize").first.click()
    dialog = docs.locator(".dialog-ux")
    dialog.locator("input").fill(key)
    dialog.get_by_role("button", name="Apply credentials").click()
    expect(dialog.get_by_role("heading", name="Authorized")).to_be_visible()
    dialog.locator(".btn-done").click()
    me.get_by_role("button", name="Try it out").click()
    me.get_by_role("button", name="Execute").click()
    live = me.locator(".live-responses-table")
    expect(live).to_contain_text("200")
    expect(live).to_contain_text('"username": "ada"')
    context.close()
