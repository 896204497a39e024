"""Building, running and debugging workflows in the browser."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server
from tests.ui.test_sources import api_key

ACTION = """export default {
  key: "ui-greet",
  name: "Greet",
  version: "0.1.0",
  type: "action",
  props: { who: { type: "string", label: "Who" } },
  async run({ $ }) {
    $.export("greeting", `hello ${this.who}`);
    return { greeted: this.who };
  },
};
"""


def set_code(page: Page, step: int, code: str) -> None:
    """Type into the step's code editor (Ace: set through its API, as a paste would)."""
    host = page.locator("[data-step]").nth(step).locator(".ace-host")
    expect(host).to_be_visible()
    host.evaluate("(el, code) => ace.edit(el).setValue(code, 1)", code)


def build(page: Page, name: str, code: str, *, trigger: str = "Manual") -> str:
    """A workflow with one code step, deployed; its id."""
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label(trigger).check()
    set_code(page, 0, code)
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    return page.url.rsplit("/", 1)[1]


def run_now(page: Page, event: str = "{}") -> None:
    # The workflow's page first: a look at whether "Run now" is open taken while a save's
    # redirect was still on its way saw none, and the click then closed the new page's open
    # one (its Event field hidden: a 30 s time-out in CI). Opened, not toggled.
    summary = page.locator("summary", has_text="Run now")
    expect(summary).to_be_visible()
    summary.locator("xpath=..").evaluate("details => { details.open = true; }")
    page.get_by_label("Event").fill(event)
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_role("heading", name="Steps")).to_be_visible()


def test_a_code_step_and_an_action_step(page: Page, server: Server) -> None:
    key = api_key(page, "actions")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as api:
        assert api.post("/v1/components", json={"component_code": ACTION}).status_code == 200
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Greeter")
    page.get_by_label("HTTP request").check()
    set_code(
        page,
        0,
        "export default defineComponent({ async run({ steps, $ }) {\n"
        '  console.log("got", steps.trigger.event.name);\n'
        "  return { name: steps.trigger.event.name }; } });\n",
    )
    page.get_by_role("button", name="+ Action step").click()
    step = page.locator("[data-step]").nth(1)
    step.get_by_label("Action").fill("ui-greet")
    step.get_by_label("Action").press("Tab")  # its props form loads
    step.get_by_label("Who").fill("{{steps.step_1.$return_value.name}}")
    # Reordering: move the action up and back down.
    step.get_by_role("button", name="Move step up").click()
    expect(page.locator("[data-step]").first.locator("input[name='step.action']")).to_have_value(
        "ui-greet"
    )
    page.locator("[data-step]").first.get_by_role("button", name="Move step down").click()
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="Greeter")).to_be_visible()
    expect(page.locator(".endpoint code")).to_contain_text("/e/")
    run_now(page, '{"name": "Ada"}')
    expect(page.locator("[data-run-status]")).to_have_text("success")
    code_step = page.locator("[data-step-result='step_1']")
    expect(code_step.locator("[data-return]")).to_contain_text('"name": "Ada"')
    expect(code_step.locator(".logs")).to_contain_text("got Ada")
    action = page.locator("[data-step-result='step_2']")
    expect(action.locator("[data-exports]")).to_contain_text('"greeting": "hello Ada"')
    expect(action.locator("[data-return]")).to_contain_text('"greeted": "Ada"')


def test_a_code_error_is_named_on_save(page: Page) -> None:
    page.goto("/workflows/new")
    page.get_by_label("Name", exact=True).fill("Broken")
    set_code(page, 0, "export default defineComponent({ async run( { return 1 } });\n")
    page.get_by_role("button", name="Deploy").click()
    problem = page.locator("[data-step]").first.locator("[data-step-error]")
    expect(problem).to_contain_text("SyntaxError")
    expect(page.locator(".ace_gutter-cell.ace_error")).to_have_text("1")


def test_a_failing_run_lands_in_errors_is_replayed_and_forwarded(page: Page) -> None:
    listener = build(
        page,
        "Listener",
        "export default defineComponent({ async run({ steps }) {\n"
        "  return steps.trigger.event.error.msg; } });\n",
    )
    failing = build(
        page,
        "Failing",
        "export default defineComponent({ async run({ steps }) {\n"
        '  if (steps.trigger.event.fail) throw new Error("it broke");\n'
        '  return "fine"; } });\n',
    )
    page.get_by_label("Listener workflow").select_option(listener)
    page.get_by_role("button", name="Forward errors").click()
    expect(page.locator(".subs")).to_contain_text(listener)
    run_now(page, '{"fail": true}')
    expect(page.locator("[data-run-status]")).to_have_text("error")
    expect(page.locator(".alert").first).to_contain_text("it broke")
    # The step's error: its message once, then the stack's frames (not the message again).
    failed = page.locator("[data-step-error]").first
    expect(failed).to_contain_text("Error: it broke")
    expect(failed.locator("pre.stack")).to_contain_text("step.mjs")
    expect(failed.locator("pre.stack")).not_to_contain_text("it broke")
    # The trigger event as a tree, as a source's events are shown.
    expect(page.locator(".json-tree").first).to_contain_text("fail: true")
    page.goto(f"/workflows/{failing}")
    errors = page.locator("table.errors tbody tr")
    expect(errors).to_have_count(1)
    expect(errors.first).to_contain_text("it broke")
    errors.first.get_by_text("event").click()
    expect(errors.first.locator("pre.json")).to_contain_text('"fail": true')
    page.on("dialog", lambda d: d.accept())
    errors.first.get_by_role("button", name="Replay").click()
    expect(page.locator("[data-run-status]")).to_have_text("error")
    expect(page.get_by_text("replay of")).to_be_visible()
    # The listener ran on each error, as its runs list shows live (no reload).
    page.goto(f"/workflows/{listener}")
    expect(page.locator("[data-runs] tbody tr")).to_have_count(2, timeout=30000)
    page.locator("[data-runs] tbody tr a").first.click()
    expect(page.locator("[data-step-result='step_1'] [data-return]")).to_contain_text("it broke")
    page.goto("/workflows")
    expect(page.get_by_role("row").filter(has_text="Failing")).to_contain_text("2 errors")


def test_editing_an_action_steps_props_and_their_errors(page: Page, server: Server) -> None:
    key = api_key(page, "actions-2")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as api:
        api.post("/v1/components", json={"component_code": ACTION}).raise_for_status()
    page.goto("/workflows/new?action=ui-greet")
    page.get_by_label("Name", exact=True).fill("Greeter 2")
    page.get_by_label("Manual").check()
    step = page.locator("[data-step]").nth(1)
    step.get_by_label("Who").evaluate("e => e.removeAttribute('required')")
    page.get_by_role("button", name="Deploy").click()
    # The platform's error lands on the field it names (steps[1].props.who).
    field = page.locator("[data-step]").nth(1).locator(".field.has-error")
    expect(field).to_contain_text("is required")
    page.locator("[data-step]").nth(1).get_by_label("Who").fill("Grace")
    page.get_by_role("button", name="+ Action step").click()
    third = page.locator("[data-step]").nth(2)
    third.get_by_label("Action").fill("ui-greet")
    third.get_by_label("Action").press("Tab")
    third.get_by_label("Who").fill("Bo")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="Greeter 2")).to_be_visible()
    page.get_by_role("link", name="Edit").click()
    who = page.locator("[data-step]").nth(1).get_by_label("Who")
    expect(who).to_have_value("Grace")
    expect(page.locator("[data-step]").nth(2).get_by_label("Who")).to_have_value("Bo")
    who.fill("Lin")
    page.get_by_role("button", name="Save and deploy").click()
    run_now(page)
    expect(page.locator("[data-step-result='step_2'] [data-exports]")).to_contain_text("hello Lin")
    expect(page.locator("[data-step-result='step_3'] [data-exports]")).to_contain_text("hello Bo")
