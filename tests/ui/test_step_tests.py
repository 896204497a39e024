"""The builder's loop, as a newcomer meets it, on SQLite and on PostgreSQL: build "webhook →
code step with an npm package → HTTP request action → $.respond", test each step on a
generated (then edited) test event without deploying, see exports, return values, logs and
errors inline, then deploy and call it; the test results kept, not the workflow's runs; a new
source as the trigger, configured in the builder; an action picked from the list."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server, database_name, serve_on
from tests.ui.test_workflows import set_code


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """This module's server, on each database (its owner made by the shared fixtures)."""
    data_dir = tmp_path_factory.mktemp(f"ui-steps-{request.param}")
    with serve_on(request.param, data_dir, database_name("steps")) as running:
        yield running


FIRST = """import isOdd from "is-odd@3.0.1";
export default defineComponent({
  async run({ steps, $ }) {
    const n = steps.trigger.event.body.n;
    console.log("n is", n);
    $.export("odd", isOdd(n));
    return { n, odd: isOdd(n) };
  },
});
"""

RESPOND = """export default defineComponent({
  async run({ steps, $ }) {
    await $.respond({ status: 200, body: { odd: steps.step_1.odd, fetched: steps.step_2.$return_value } });
  },
});
"""


def test_build_test_each_step_then_deploy(
    page: Page, file_server: tuple[str, dict[str, str]]
) -> None:
    base, files = file_server
    files["/data.txt"] = "fetched-by-the-action"
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Odd checker")
    page.get_by_label("HTTP request").check()
    page.get_by_label("Respond with").check()

    # A generated test event has the HTTP trigger's shape; edit it to carry n.
    page.get_by_role("button", name="Generate a test event").click()
    test_event = page.get_by_label("Test event")
    generated = json.loads(test_event.input_value())
    assert generated["method"] == "POST" and generated["body"] == {"hello": "world"}
    test_event.fill(json.dumps({**generated, "body": {"n": 3}}))

    step1 = page.locator("[data-step]").nth(0)
    set_code(
        page, 0, "export default defineComponent({ async run() { throw new Error('boom'); } });"
    )
    step1.get_by_role("button", name="Test").click()
    result = step1.locator("[data-test-result]")
    expect(result.locator("[data-test-status]")).to_have_text("error")
    expect(result.locator("[data-test-step-error]")).to_contain_text("boom")

    set_code(page, 0, FIRST)
    step1.get_by_role("button", name="Test").click()
    expect(result.locator("[data-test-status]")).to_have_text("success")
    expect(result.locator("[data-test-exports]")).to_contain_text('"odd": true')
    expect(result.locator("[data-test-return]")).to_contain_text('"n": 3')
    expect(result.locator("[data-test-logs]")).to_contain_text("n is 3")

    # An action from the registry (a core component), tested with the earlier step's output.
    page.get_by_role("button", name="+ Action step").click()
    step2 = page.locator("[data-step]").nth(1)
    step2.get_by_label("Action").fill("http-custom-request")
    step2.get_by_label("Action").press("Tab")
    step2.get_by_label("URL").fill(f"{base}/data.txt")
    step2.get_by_role("button", name="Test").click()
    result2 = step2.locator("[data-test-result]")
    expect(result2.locator("[data-test-status]")).to_have_text("success")
    expect(result2.locator("details[open] [data-test-return]")).to_contain_text(
        "fetched-by-the-action"
    )
    expect(result2.locator("details[open] [data-test-exports]")).to_contain_text("HTTP 200")

    page.get_by_role("button", name="+ Code step").click()
    set_code(page, 2, RESPOND)
    step3 = page.locator("[data-step]").nth(2)
    step3.get_by_role("button", name="Test").click()
    expect(step3.locator("[data-test-response]")).to_contain_text('"odd": true')

    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="Odd checker")).to_be_visible()
    # The tests were not runs of the workflow.
    expect(page.get_by_text("No runs yet")).to_be_visible()
    endpoint = page.locator(".endpoint code").inner_text()
    with httpx.Client(timeout=60) as client:
        answer = client.post(endpoint, json={"n": 4})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"odd": False, "fetched": "fetched-by-the-action"}

    # A deployed workflow's Test is kept: the builder shows each step's last test on reopening.
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Test event").fill(json.dumps({**generated, "body": {"n": 5}}))
    first = page.locator("[data-step]").nth(0)
    first.get_by_role("button", name="Test").click()
    expect(first.locator("[data-test-return]")).to_contain_text('"n": 5')
    expect(first.locator("[data-test-result]")).to_contain_text("kept as this step's last test")
    page.reload()
    first = page.locator("[data-step]").nth(0)
    expect(first.locator("[data-test-kept]")).to_contain_text("last test")
    expect(first.locator("[data-test-status]")).to_have_text("success")
    expect(first.locator("[data-test-logs]")).to_contain_text("n is 5")
    expect(first.locator("[data-test-exports]")).to_contain_text('"odd": true')
    expect(page.locator("[data-step]").nth(1).locator("[data-test-result]")).to_have_count(0)


def test_a_new_source_trigger_is_configured_in_the_builder(page: Page) -> None:
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Ticker")
    page.get_by_label("New source", exact=True).check()
    picker = page.locator("[data-trigger-picker]")
    for name in ("New Requests", "Custom Interval", "New Item in Feed"):
        expect(picker.get_by_label(name, exact=True)).to_be_visible()
    # Each app has its icon, from this server (a generated monogram: no CDN).
    icons = picker.locator("[data-pick-app] h4 img.app-icon")
    expect(icons.first).to_have_attribute("src", re.compile(r"^data:image/svg\+xml;base64,"))
    picker.get_by_label("Find a source by name, app or description").fill("interval")
    expect(picker.locator("[data-pick-entry]:visible")).to_have_count(1)
    picker.get_by_label("Custom Interval", exact=True).check()
    # Its props form loads in the builder itself; a bad value is named on its field.
    props = page.locator("[data-trigger-props]")
    expect(props.get_by_label("Interval in seconds")).to_have_value("900")  # the default
    props.get_by_label("Interval in seconds").fill("")
    props.get_by_label("cron").fill("not a cron")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("[data-trigger-props] .field.has-error")).to_contain_text("cron")
    expect(page.get_by_label("New source", exact=True)).to_be_checked()
    expect(page.get_by_label("Custom Interval", exact=True)).to_be_checked()
    page.get_by_label("Source name").fill("every-hour")
    props.get_by_label("cron").fill("")
    props.get_by_label("Interval in seconds").fill("3600")
    # The source deploys, the workflow is refused (a step that does not load): the source is
    # deleted again, and the builder shows the step's error with the trigger still picked.
    set_code(page, 0, "export default defineComponent({ async run( { } });")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("[data-step-error]")).to_be_visible()
    expect(page.get_by_label("Custom Interval", exact=True)).to_be_checked()
    expect(page.get_by_label("Source name")).to_have_value("every-hour")
    set_code(page, 0, "export default defineComponent({ async run() { return 1; } });")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="Ticker")).to_be_visible()
    page.goto("/sources")
    expect(page.get_by_role("link", name="every-hour")).to_have_count(1)  # not two
    page.go_back()
    expect(page.locator("[data-trigger-source]")).to_have_text("every-hour")

    # An existing workflow's trigger changes in the builder too: to a new webhook source.
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("A source's events")).to_be_checked()
    page.get_by_label("New source", exact=True).check()
    page.get_by_label("New Requests", exact=True).check()
    page.locator("[data-trigger-props]").get_by_label("Response Status Code").fill("202")
    page.get_by_label("Source name").fill("ticker-hook")
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("ticker-hook")
    page.locator("[data-trigger-source]").click()
    endpoint = page.locator("#endpoint-url").inner_text()
    with httpx.Client(timeout=60) as client:
        assert client.post(endpoint, json={"tick": 1}).status_code == 202


def test_an_action_picked_from_the_list_and_tested(page: Page) -> None:
    page.goto("/workflows/new")
    page.get_by_label("Manual").check()
    page.get_by_role("button", name="+ Action step").click()
    step = page.locator("[data-step]").nth(1)
    step.locator("summary", has_text="Browse actions").click()
    search = step.get_by_label("Find by name, app or description")
    search.fill("formatting case")
    picks = step.locator("[data-action-entry]:visible")
    expect(picks).to_have_count(1)
    app = step.locator("[data-action-app]:visible h4")
    expect(app).to_have_text("Formatting")  # the app's name in the catalog, with its icon
    expect(app.locator("img.app-icon")).to_have_attribute(
        "src", re.compile(r"^data:image/svg\+xml;base64,")
    )
    picks.get_by_role("button", name="Transform Case").click()
    expect(step.locator("input[name='step.action']")).to_have_value("formatting-transform-case")
    step.get_by_label("Input").fill("Hello big World")  # its props form loaded
    step.get_by_label("Operation").select_option(label="snake case")
    step.get_by_role("button", name="Test").click()
    expect(step.locator("[data-test-status]")).to_have_text("success")
    expect(step.locator("details[open] [data-test-return]")).to_contain_text('"hello_big_world"')


def test_a_new_sources_test_event_is_shaped_as_its_events(page: Page) -> None:
    page.goto("/workflows/new")
    page.get_by_label("New source", exact=True).check()
    page.get_by_label("New Messages", exact=True).check()  # the e-mail source
    # Its props come by htmx above the button: a click before they land can miss the button
    # as it moves (seen once: the test event stayed empty).
    expect(page.locator("[data-trigger-props]")).to_contain_text("New Messages")
    page.get_by_role("button", name="Generate a test event").click()
    expect(page.get_by_label("Test event")).not_to_have_value("")
    generated = json.loads(page.get_by_label("Test event").input_value())
    assert generated["subject"] == "A test message"
    assert generated["from"]["address"] == "ada@example.com"
    # Left empty, the server generates the same shape for the Test.
    page.get_by_label("Test event").fill("")
    step = page.locator("[data-step]").nth(0)  # returns steps.trigger.event
    step.get_by_role("button", name="Test").click()
    expect(step.locator("[data-test-return]")).to_contain_text('"subject": "A test message"')

    page.get_by_label("New Requests", exact=True).check()  # a webhook: an HTTP request
    expect(page.locator("[data-trigger-props]")).to_contain_text("New Requests")
    page.get_by_role("button", name="Generate a test event").click()
    expect(page.get_by_label("Test event")).not_to_have_value("")
    assert json.loads(page.get_by_label("Test event").input_value())["method"] == "POST"


def _new_source_trigger(page: Page, name: str, source_name: str) -> None:
    """Pick ``name`` (a registry source) as the workflow's New source trigger."""
    page.get_by_label("New source", exact=True).check()
    page.get_by_label(name, exact=True).check()
    expect(page.locator("[data-trigger-props] .field").first).to_be_visible()
    page.get_by_label("Source name").fill(source_name)


def test_the_builders_old_trigger_source_goes_when_the_trigger_changes(page: Page) -> None:
    # A source the user deployed beforehand, and a workflow on a new source of the builder's.
    page.goto("/sources?action=create&key=http-new-requests")
    page.locator("#name").fill("kept-hook")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#endpoint-url")).to_be_visible()
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Switcher")
    _new_source_trigger(page, "Custom Interval", "switch-tick")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("switch-tick")
    notice = page.locator("[data-released-source]")
    expect(notice).to_have_count(0)

    # To the existing source: the builder's source, with no events, is deleted.
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("A source's events").check()
    picked = page.locator("select[name='trigger.source_id']")
    picked.select_option(picked.locator("option", has_text="kept-hook").get_attribute("value"))
    # Its props land by htmx above the button: a click before they do can miss the button as
    # it moves (seen once in CI: the page stayed on the form, nothing saved).
    expect(page.locator("[data-trigger-source-props]")).to_contain_text("Props of kept-hook")
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("kept-hook")
    expect(notice).to_contain_text("the builder deployed for the old trigger was deleted")
    page.goto("/sources")
    expect(page.get_by_role("link", name="switch-tick")).to_have_count(0)

    # To a new webhook source, which gets a request: the picked source stays as it was.
    page.go_back()
    page.get_by_role("link", name="Edit").click()
    _new_source_trigger(page, "New Requests", "switch-hook")
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("switch-hook")
    expect(notice).to_have_count(0)  # kept-hook was the user's: not touched
    page.locator("[data-trigger-source]").click()
    endpoint = page.locator("#endpoint-url").inner_text()
    with httpx.Client(timeout=60) as client:
        assert client.post(endpoint, json={"n": 1}).status_code == 200
    expect(page.locator("[data-event-rows] tr")).to_have_count(1)

    # To HTTP: the webhook source has an event, so it is stopped and kept with it.
    page.go_back()
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("HTTP request").check()
    page.get_by_role("button", name="Save and deploy").click()
    expect(notice).to_contain_text(
        "switch-hook the builder deployed for the old trigger was stopped"
    )
    with httpx.Client(timeout=60) as client:
        assert client.post(endpoint, json={"n": 2}).status_code == 404
    notice.get_by_role("link", name="switch-hook").click()
    expect(page.locator("[data-event-rows] tr")).to_have_count(1)
    expect(page.get_by_text("inactive")).to_be_visible()

    # Deleting the workflow deletes its builder's source too; the user's own stays.
    page.goto("/workflows")
    page.get_by_role("link", name="Switcher").click()
    page.get_by_role("link", name="Edit").click()
    _new_source_trigger(page, "Custom Interval", "last-tick")
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("last-tick")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(notice).to_contain_text("the builder deployed for the old trigger was deleted")
    page.goto("/sources")
    expect(page.get_by_role("link", name="last-tick")).to_have_count(0)
    expect(page.get_by_role("link", name="kept-hook")).to_have_count(1)
    expect(page.get_by_role("link", name="switch-hook")).to_have_count(1)


def test_a_trigger_sources_props_are_edited_in_the_builder(page: Page) -> None:
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Props hook")
    _new_source_trigger(page, "New Requests", "props-hook")
    page.locator("[data-trigger-props]").get_by_label("Response Status Code").fill("201")
    page.get_by_role("button", name="Deploy").click()
    page.locator("[data-trigger-source]").click()
    endpoint = page.locator("#endpoint-url").inner_text()
    with httpx.Client(timeout=60) as client:
        assert client.post(endpoint, json={"n": 1}).status_code == 201
    page.go_back()

    # Reopened, the builder shows the deployed source's props, the same fields, and saves them.
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("A source's events")).to_be_checked()
    source_props = page.locator("[data-trigger-source-props]")
    expect(source_props).to_contain_text("props-hook")
    expect(source_props.get_by_label("Response Status Code")).to_have_value("201")
    source_props.get_by_label("Response Status Code").fill("202")
    source_props.get_by_label("Response Body").fill('{"edited": true}')
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("props-hook")
    with httpx.Client(timeout=60) as client:
        answer = client.post(endpoint, json={"n": 2})
    assert (answer.status_code, answer.json()) == (202, {"edited": True})

    # A schedule source: a bad value is named on its field and nothing is saved.
    page.get_by_role("link", name="Edit").click()
    _new_source_trigger(page, "Custom Interval", "props-tick")
    page.get_by_role("button", name="Save and deploy").click()
    expect(page.locator("[data-trigger-source]")).to_have_text("props-tick")
    page.get_by_role("link", name="Edit").click()
    source_props = page.locator("[data-trigger-source-props]")
    expect(source_props.get_by_label("Interval in seconds")).to_have_value("900")
    source_props.get_by_label("Interval in seconds").fill("")
    source_props.get_by_label("cron").fill("not a cron")
    page.get_by_role("button", name="Save and deploy").click()
    expect(source_props.locator(".field.has-error")).to_contain_text("cron")
    expect(source_props.get_by_label("cron")).to_have_value("not a cron")
    source_props.get_by_label("cron").fill("")
    source_props.get_by_label("Interval in seconds").fill("7200")
    page.get_by_role("button", name="Save and deploy").click()
    page.locator("[data-trigger-source]").click()
    expect(page.get_by_label("Interval in seconds")).to_have_value("7200")

    # Choosing another source under "A source's events" loads that source's props.
    page.go_back()
    page.get_by_role("link", name="Edit").click()
    chosen = page.locator("select[name='trigger.source_id']")
    chosen.select_option(chosen.locator("option", has_text="props-hook").get_attribute("value"))
    expect(source_props.get_by_label("Response Status Code")).to_have_value("202")
