"""A fresh install, on SQLite and on PostgreSQL: the first visitor creates the owner, deploys
the core webhook source by the spec's address (``/sources?action=create&key=http-new-requests``)
and sees its events arrive live, with the answer configured in the form."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.ui.conftest import Server, create_owner, database_name, serve_on


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fresh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A just-installed Sluice: an empty data folder (and, for PostgreSQL, an empty database)."""
    data_dir = tmp_path_factory.mktemp(f"fresh-{request.param}")
    name = database_name("core")
    with serve_on(request.param, data_dir, name) as running:
        yield running


def test_a_fresh_install_deploys_the_webhook_source_and_sees_events_live(
    browser: Browser, fresh: Server
) -> None:
    context = browser.new_context(base_url=fresh.url)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto("/")
    expect(page).to_have_url(f"{fresh.url}/setup")
    create_owner(page)

    # The registry lists the core components with no publishing done by anyone.
    page.goto("/registry?q=http")
    expect(page.get_by_role("link", name="New Requests")).to_be_visible()
    expect(page.get_by_role("link", name="Custom Request")).to_be_visible()

    page.goto("/sources?action=create&key=http-new-requests")
    expect(page.get_by_role("heading", name="Deploy New Requests")).to_be_visible()
    expect(page.get_by_label("Response Status Code")).to_have_value("200")  # the default
    page.get_by_label("Response Status Code").fill("202")
    page.get_by_label("Response Body").fill('{"received": true}')
    page.locator("#name").fill("my-webhook")
    page.get_by_role("button", name="Deploy").click()

    expect(page.locator("#endpoint-url")).to_be_visible()
    endpoint = page.locator("#endpoint-url").inner_text()
    expect(page.locator("[data-live-status]")).to_have_text("live")
    with httpx.Client(timeout=60) as client:
        answer = client.post(endpoint + "/orders?src=shop", json={"order": 42})
        assert answer.status_code == 202 and answer.json() == {"received": True}
    rows = page.locator("[data-event-rows] tr")
    expect(rows).to_have_count(1)  # arrived without a reload
    expect(rows.first).to_contain_text("POST /orders")
    rows.first.click()
    inspector = page.locator("[data-inspector]")
    expect(inspector.locator("[data-event-json]")).to_contain_text('"order": 42')
    expect(inspector.locator("[data-event-json]")).to_contain_text('"src": "shop"')
    context.close()
    assert not problems, problems
