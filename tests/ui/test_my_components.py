"""My components: one row per key with its versions, what runs each, and delete for a
version nothing runs; the same code saved again is no new entry."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.ui.test_source_code import hello, type_code


def save_code(page: Page, code: str) -> None:
    page.goto("/sources?action=create")
    type_code(page, "#write-code", code)
    page.get_by_role("button", name="Save and configure").click()
    expect(page.get_by_role("heading", name="Deploy Hello")).to_be_visible()


def test_one_row_per_key_with_versions_users_and_delete(page: Page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    first = hello("1.0.0", "one").replace("ui-hello", "ui-mine")
    save_code(page, first)
    page.locator("#name").fill("mine-in-use")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#endpoint-url")).to_be_visible()
    save_code(page, first)  # the same code again: no new entry
    save_code(page, first.replace("1.0.0", "1.1.0"))

    page.goto("/components")
    row = page.locator("[data-component-row='ui-mine']")
    expect(row).to_have_count(1)
    versions = row.locator("[data-version]")
    expect(versions).to_have_count(2)
    newest, oldest = versions.nth(0), versions.nth(1)
    expect(newest).to_contain_text("1.1.0")
    expect(newest).to_contain_text("unused")
    expect(oldest).to_contain_text("1.0.0")
    expect(oldest.locator("[data-used-by]")).to_contain_text("mine-in-use")
    expect(oldest.get_by_role("button", name="Delete")).to_have_count(0)

    newest.get_by_role("button", name="Delete").click()
    expect(row.locator("[data-version]")).to_have_count(1)
    expect(row).not_to_contain_text("1.1.0")
