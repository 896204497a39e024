"""Issue 26, point 8: the small things a newcomer met in the first hour, each seen in the
browser (the others are tested where they live: tests/e2e/test_serve.py, test_cli.py,
tests/unit/test_logs_and_links.py, test_cli_names.py, tests/ui/test_workflows.py,
test_logins.py, test_source_code.py; the list is in docs/ui.md's tests section)."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, Page, Request, expect

from tests.ui.conftest import Server
from tests.ui.test_workflows import build, set_code


def _no_posts(page: Page) -> list[Request]:
    posted: list[Request] = []
    page.on("request", lambda r: posted.append(r) if r.method == "POST" else None)
    return posted


def test_a_form_shown_again_with_its_error_has_its_pages_address(page: Page) -> None:
    # A failed deploy of a source: the deploy form's own address, and a reload posts nothing.
    page.goto("/sources?action=create&key=schedule-custom-interval")
    page.get_by_label("Interval in seconds").fill("")
    page.get_by_label("cron").fill("not a cron")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator(".field.has-error")).to_contain_text("cron")
    expect(page).to_have_url(re.compile(r"/sources\?action=create&component=sc_\w+$"))
    posted = _no_posts(page)
    page.reload()
    expect(page.locator(".field.has-error")).to_have_count(0)
    assert posted == []

    # A failed deploy in the builder.
    page.goto("/workflows/new")
    set_code(page, 0, "export default defineComponent({ async run( { } });")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("[data-step-error]")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/workflows/new$"))

    # An environment variable refused, and an API key made (shown once): a reload makes no
    # second key.
    page.goto("/settings/env")
    name = page.get_by_label("Name")
    name.evaluate("el => el.removeAttribute('pattern')")  # the server's check, not the browser's
    name.fill("1 bad name")
    page.get_by_label("Value").fill("x")
    page.get_by_role("button", name="Set").click()
    expect(page.locator(".alert, .field-error").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"/settings/env$"))
    # A connected account refused (no credential field): back on the accounts page.
    page.goto("/accounts")
    page.get_by_label("App", exact=True).fill("acme-x")
    page.get_by_role("button", name="Save account").click()
    expect(page.locator(".alert").first).to_contain_text("credential")
    expect(page).to_have_url(re.compile(r"/accounts\?app=acme-x$"))
    page.goto("/settings/keys")
    page.get_by_label("Name").fill("reload-me")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_text("reload-me").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"/settings/keys$"))
    posted = _no_posts(page)
    page.reload()
    expect(page.locator("td", has_text="reload-me")).to_have_count(1)
    assert posted == []


def test_code_from_the_builder_is_saved_with_lf(page: Page) -> None:
    workflow = build(
        page,
        "Line endings",
        "export default defineComponent({\n  async run() {\n    return 1;\n  },\n});\n",
    )
    # The builder's form posts a textarea, whose line breaks the browser sends as CRLF.
    stored = page.request.get(f"/v1/workflows/{workflow}").json()["data"]["steps"][0]["code"]
    assert "\r" not in stored and stored.count("\n") >= 4


def test_a_long_step_error_wraps_clear_of_the_steps_buttons(page: Page) -> None:
    page.goto("/workflows/new")
    missing = "./" + "a-very-long-missing-module-name" * 12 + ".mjs"
    set_code(
        page,
        0,
        f'import x from "{missing}";\nexport default defineComponent({{ async run() {{ return x; }} }});',
    )
    page.get_by_role("button", name="Deploy").click()
    error = page.locator("[data-step]").first.locator("[data-step-error]")
    expect(error).to_contain_text("a-very-long-missing-module-name")
    # It wraps inside its box (nothing runs past it) and keeps clear of the step's buttons.
    assert error.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    box = error.bounding_box()
    step = page.locator("[data-step]").first
    for button in step.locator(".step-tools button").all():
        other = button.bounding_box()
        assert box and other
        overlaps = (
            box["x"] < other["x"] + other["width"]
            and other["x"] < box["x"] + box["width"]
            and box["y"] < other["y"] + other["height"]
            and other["y"] < box["y"] + box["height"]
        )
        assert not overlaps, (box, other)


def test_a_workflows_page_texts_and_forwarding_list(page: Page) -> None:
    build(page, "Other one", "export default defineComponent({ async run() { return 1; } });")
    build(page, "Quiet", "export default defineComponent({ async run() { return 1; } });")
    # "No runs yet. press …" read as a broken sentence.
    expect(page.locator("[data-runs] .empty")).to_have_text(re.compile(r"^No runs yet\. [A-Z]"))
    # The Forward errors list asks: no unrelated workflow preselected.
    listener = page.get_by_label("Listener workflow")
    expect(listener).to_have_value("")
    expect(listener.locator("option:checked")).to_have_text("Choose a workflow…")


def test_event_rows_differ_and_the_raw_pane_shows_the_body_as_sent(page: Page) -> None:
    page.goto("/sources?action=create&key=http-new-requests")
    page.locator("#name").fill("raw-hook")
    page.get_by_role("button", name="Deploy").click()
    endpoint = page.locator("#endpoint-url").inner_text()
    expect(page.locator("[data-live-status]")).to_have_text("live")
    sent = '{"a":1,"b":[1,2]}'
    with httpx.Client(timeout=60) as client:
        for _ in range(2):
            client.post(endpoint, content=sent, headers={"content-type": "application/json"})
    rows = page.locator("[data-event-rows] tr")
    expect(rows).to_have_count(2)
    # Each row has its clock time to the second, not only "just now".
    for row in rows.all():
        expect(row).to_contain_text(re.compile(r"\d{1,2}:\d{2}:\d{2}"))
    rows.first.click()
    # The raw request pane shows the body as it came, not pretty-printed again.
    expect(page.locator("[data-raw-request]")).to_contain_text(sent)


def test_a_refused_login_has_the_login_pages_address(
    browser: Browser, server: Server, owner_state: dict[str, object]
) -> None:
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/workflows")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fworkflows$"))
    page.get_by_label("Username or e-mail").fill("ada")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".alert").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fworkflows$"))
    posted = _no_posts(page)
    page.reload()
    assert posted == []
    context.close()
