"""The registry and the account's components, connected accounts, and the offline API docs."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server
from tests.ui.test_sources import api_key

TICKER = """export default {
  key: "acme-ticker",
  name: "Ticker",
  version: "1.0.0",
  description: "Emits on a **schedule**.",
  props: {
    timer: { type: "$.interface.timer", default: { intervalSeconds: 600 } },
    app: { type: "app", app: "acme" },
  },
  async run() { this.$emit({ tick: true }); },
};
"""


def test_browse_search_and_deploy_with_a_connected_account(page: Page, server: Server) -> None:
    key = api_key(page, "registry")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as api:
        assert (
            api.post("/v1/components/registry", json={"component_code": TICKER}).status_code == 200
        )
        # Any case, in the description (the core components' schedules say "schedule" too).
        found = api.get("/v1/components/registry", params={"q": "ON A **SCHEDULE"}).json()["data"]
        assert [c["key"] for c in found] == ["acme-ticker"] and "code" not in found[0]
    page.goto("/registry")
    page.keyboard.press("/")
    page.keyboard.type("ticker")
    page.keyboard.press("Enter")
    card = page.locator(".cards .card").filter(has_text="Ticker")
    expect(card).to_contain_text("acme-ticker")
    page.goto("/registry?q=nothing-like-this")
    expect(page.locator(".empty")).to_contain_text("Nothing matches")
    page.goto("/components/acme-ticker")
    expect(page.get_by_role("cell", name="timer", exact=True)).to_be_visible()

    # No acme account yet: the picker says so and links to adding one.
    page.get_by_role("link", name="Deploy").click()
    expect(page.get_by_label("app")).to_contain_text("No acme account yet")
    page.goto("/accounts?app=acme")
    page.get_by_label("Name optional").fill("acme prod")
    page.get_by_label("Field name").fill("api_key")
    page.get_by_label("Field value").fill("k-123")
    page.get_by_role("button", name="Save account").click()
    row = page.get_by_role("row").filter(has_text="acme prod")
    expect(row).to_contain_text("api_key")
    assert "k-123" not in page.content()

    page.goto("/sources?action=create&key=acme-ticker")
    options = page.get_by_label("app").locator("option")
    expect(options).to_have_count(2)
    page.get_by_label("app").select_option(index=1)
    expect(page.get_by_label("Interval in seconds")).to_have_value("600")
    page.get_by_label("Interval in seconds").fill("900")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_label("Interval in seconds")).to_have_value("900")
    # A timer source has no endpoint: "Run now" is open, and its event arrives live.
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator("[data-event-rows] tr")).to_have_count(1)
    page.goto("/sources")
    expect(page.get_by_role("row").filter(has_text="Ticker")).to_contain_text("timer")

    page.goto("/accounts")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("row").filter(has_text="acme prod").get_by_role(
        "button", name="Delete"
    ).click()
    expect(page.get_by_role("row").filter(has_text="acme prod")).to_have_count(0)


def test_the_api_docs_load_from_this_server(page: Page, server: Server) -> None:
    outside: list[str] = []
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(server.url) else None,
    )
    page.goto("/docs")
    expect(page.get_by_text("/v1/users/me/sources").first).to_be_visible(timeout=15000)
    assert outside == []
