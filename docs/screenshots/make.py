"""Regenerate docs/screenshots/*.png: a fresh server with sample data, every main page in
Chromium. Run by ``bin/screenshots``."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.ui.conftest import CHROMIUM, Server, create_owner, serve  # noqa: E402
from tests.ui.test_catalog import TICKER  # noqa: E402
from tests.ui.test_sources import ALL_PROPS, api_key  # noqa: E402
from tests.ui.test_workflows import ACTION, build, run_now, set_code  # noqa: E402

OUT = Path(__file__).resolve().parent


def shot(page: Page, name: str) -> None:
    page.wait_for_load_state("networkidle")
    # From the top (the side bar is sticky: a scrolled page would show it half-way down).
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
    print(f"docs/screenshots/{name}.png")


def shot_of(page: Page, selector: str, name: str) -> None:
    """One part of the page (``selector``), scrolled into view."""
    page.wait_for_load_state("networkidle")
    part = page.locator(selector).first
    part.scroll_into_view_if_needed()
    part.screenshot(path=str(OUT / f"{name}.png"))
    print(f"docs/screenshots/{name}.png")


def source_code(page: Page) -> None:
    """A deployed source's code edited on its page (version 0.1.0 → 0.1.1), the result shown."""
    host = page.locator("#code .ace-host")
    code = host.evaluate("el => ace.edit(el).getValue()")
    host.evaluate("(el, code) => ace.edit(el).setValue(code, 1)",
                  code.replace('version: "0.1.0"', 'version: "0.1.1"'))
    page.get_by_role("button", name="Update code").click()
    expect(page.locator("[data-update-result]")).to_contain_text("0.1.1")
    shot_of(page, "#code", "source-code")


def trigger_picker(page: Page) -> None:
    """The builder's New source trigger: the list by app, one picked with its props form;
    then, deployed, the trigger source's props in the builder."""
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Hourly report")
    page.get_by_label("New source", exact=True).check()
    page.get_by_label("Custom Interval", exact=True).check()
    expect(page.locator("[data-trigger-props]").get_by_label("Interval in seconds")).to_be_visible()
    page.get_by_label("Source name").fill("every-hour")
    page.locator("[data-trigger-props]").get_by_label("Interval in seconds").fill("3600")
    shot_of(page, "fieldset:has([data-trigger-picker])", "workflow-trigger-picker")
    page.get_by_role("button", name="Deploy").click()
    page.get_by_role("link", name="Edit").click()
    expect(page.locator("[data-trigger-source-props]")).to_contain_text("every-hour")
    shot_of(page, "fieldset:has([data-trigger-source-props])", "workflow-trigger-source")


def seed_sources(page: Page, server: Server, key: str) -> str:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as api:
        api.timeout = 120
        api.post("/v1/components/registry", json={"component_code": ALL_PROPS}).raise_for_status()
        api.post("/v1/components/registry", json={"component_code": TICKER}).raise_for_status()
        api.post("/v1/components", json={"component_code": ACTION}).raise_for_status()
        api.post("/v1/accounts", json={"app": "acme", "name": "acme prod",
                                       "credentials": {"api_key": "k"}}).raise_for_status()
        # A connectable OAuth app, for the accounts page's Connect button (no request to it).
        api.put("/v1/apps/github", json={"oauth": {"client_id": "Iv1.example",
                                                   "client_secret": "example"}}).raise_for_status()
    page.goto("/sources?action=create&key=ui-all-props")
    page.get_by_label("Label").fill("order")
    page.get_by_label("color").select_option("green")
    shot(page, "source-deploy")
    page.get_by_role("button", name="Deploy").click()
    endpoint = page.locator("#endpoint-url").inner_text()
    with httpx.Client(timeout=60) as client:
        for n in range(1, 6):
            client.post(endpoint, json={"n": n, "customer": {"name": "Ada", "vip": n % 2 == 0}})
            expect(page.locator("[data-event-rows] tr")).to_have_count(n)
    page.locator("[data-event-rows] tr").first.click()
    return page.url


def seed_workflows(page: Page) -> str:
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Order to CRM")
    page.get_by_label("HTTP request").check()
    set_code(page, 0, "export default defineComponent({\n  async run({ steps, $ }) {\n"
             '    console.log("order", steps.trigger.event.n);\n'
             "    return { name: steps.trigger.event.name };\n  },\n});\n")
    page.get_by_role("button", name="+ Action step").click()
    step = page.locator("[data-step]").nth(1)
    step.get_by_label("Action").fill("ui-greet")
    step.get_by_label("Action").press("Tab")  # its props form loads
    step.get_by_label("Who").fill("{{steps.step_1.$return_value.name}}")
    shot(page, "workflow-builder")
    # The builder's Test: a generated event, the first step run, its result inline.
    page.get_by_role("button", name="Generate a test event").click()
    page.get_by_label("Test event").fill('{"name": "Ada", "n": 1}')
    page.locator("[data-step]").first.get_by_role("button", name="Test").click()
    expect(page.locator("[data-test-status]")).to_have_text("success")
    shot(page, "workflow-test")
    page.get_by_role("button", name="Deploy").click()
    run_now(page, '{"name": "Ada", "n": 1}')
    shot(page, "run")
    failing = build(page, "Nightly sync", 'export default defineComponent({ async run({ steps }) {\n'
                    '  if (steps.trigger.event.fail) throw new Error("upstream answered 502");\n'
                    '  return "ok"; } });\n')
    for fail in ("false", "true"):
        page.goto(f"/workflows/{failing}")
        run_now(page, f'{{"fail": {fail}}}')
    return f"/workflows/{failing}"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp)) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(base_url=server.url, viewport={"width": 1360, "height": 860})
        page.goto("/")
        shot(page, "setup")
        create_owner(page)
        shot(page, "sources-empty")
        key = api_key(page, "laptop CLI")
        shot(page, "api-keys")
        source_url = seed_sources(page, server, key)
        shot(page, "source")
        source_code(page)
        page.goto("/sources")
        shot(page, "sources")
        failing = seed_workflows(page)
        trigger_picker(page)
        page.goto(failing)
        page.locator("table.errors tbody tr").first.get_by_text("event").click()
        shot(page, "workflow")
        page.goto("/workflows")
        shot(page, "workflows")
        for path, name in [("/registry", "registry"), ("/components/acme-ticker", "component"),
                           ("/components", "my-components"),
                           ("/sources?action=create", "source-new"),
                           ("/accounts", "accounts"), ("/settings", "settings")]:
            page.goto(path)
            shot(page, name)
        page.goto("/docs")
        expect(page.get_by_text("/v1/users/me/sources").first).to_be_visible(timeout=15000)
        shot(page, "docs")
        page.goto(f"/sources?action=create&url={quote('file:///etc/passwd', safe='')}")
        shot(page, "source-pick-error")
        page.get_by_role("button", name="Log out").click()
        shot(page, "login")
        del source_url
        browser.close()


if __name__ == "__main__":
    main()
