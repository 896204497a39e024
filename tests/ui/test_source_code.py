"""Sources from code in the browser, on SQLite and on PostgreSQL: a new source written in the
code editor, its code edited after deploying, and its version moved, each update's result shown
on the page."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server, database_name, serve_on


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """This module's server, on each database (its owner made by the shared fixtures)."""
    data_dir = tmp_path_factory.mktemp(f"ui-code-{request.param}")
    with serve_on(request.param, data_dir, database_name("code")) as running:
        yield running


def hello(version: str, answer: str) -> str:
    return f"""export default {{
  key: "ui-hello",
  name: "Hello",
  version: "{version}",
  props: {{ http: {{ type: "$.interface.http", customResponse: true }} }},
  async run(event) {{
    this.http.respond({{ status: 200, body: {{ version: "{version}" }} }});
    this.$emit({{ answer: "{answer}", got: event.body }}, {{ summary: "{answer}" }});
  }},
}};
"""


def type_code(page: Page, within: str, code: str) -> None:
    """Type into a code editor (Ace: set through its API, as a paste would)."""
    host = page.locator(within).locator(".ace-host")
    host.evaluate("(el, code) => ace.edit(el).setValue(code, 1)", code)


def test_write_deploy_edit_and_move_a_source(page: Page) -> None:
    page.goto("/sources?action=create")
    # The editor starts with a webhook source; a syntax error is named and its line marked.
    expect(page.locator("#write-code .ace-host")).to_contain_text("$.interface.http")
    type_code(page, "#write-code", "export default {\n  name: 'x',\n  run( {\n};\n")
    page.get_by_role("button", name="Save and configure").click()
    expect(page.locator("[data-code-error]")).to_contain_text("SyntaxError")
    expect(page.locator(".ace_gutter-cell.ace_error")).to_have_count(1)

    type_code(page, "#write-code", hello("0.0.1", "one"))
    page.get_by_role("button", name="Save and configure").click()
    expect(page.get_by_role("heading", name="Deploy Hello")).to_be_visible()
    page.locator("#name").fill("hello-ui")
    page.get_by_role("button", name="Deploy").click()
    endpoint = page.locator("#endpoint-url")
    expect(endpoint).to_be_visible()
    url = endpoint.inner_text()
    expect(page.locator("[data-live-status]")).to_have_text("live")
    rows = page.locator("[data-event-rows] tr")
    with httpx.Client(timeout=60) as client:
        assert client.post(url, json={"n": 1}).json() == {"version": "0.0.1"}
        expect(rows.first).to_contain_text("one")

        # Edit the deployed source's code: same id and endpoint, the new code answers.
        type_code(page, "#code", hello("0.0.2", "two"))
        page.get_by_role("button", name="Update code").click()
        result = page.locator("[data-update-result]")
        expect(result).to_contain_text("now runs Hello 0.0.2")
        expect(page.locator("#endpoint-url")).to_have_text(url)
        expect(page.locator("[data-live-status]")).to_have_text("live")
        assert client.post(url, json={"n": 2}).json() == {"version": "0.0.2"}
        expect(rows.first).to_contain_text("two")

        # Both versions are offered; move back to the first.
        version = page.get_by_label("Version")
        expect(version.locator("option")).to_have_count(2)
        expect(version.locator("option:checked")).to_contain_text("0.0.2")
        version.select_option(label=version.locator("option").nth(1).inner_text())
        page.get_by_role("button", name="Move to this version").click()
        expect(result).to_contain_text("to another version: the source now runs Hello 0.0.1")
        expect(page.locator("[data-newer]")).to_have_text("0.0.2 is available")
        assert client.post(url, json={"n": 3}).json() == {"version": "0.0.1"}

    # A broken edit changes nothing: the error is shown with the code kept, and the address
    # is the source's page again (a reload does not post the form a second time).
    here = page.url.split("?")[0]
    type_code(page, "#code", "export default { name: 'Hello', version: '0.0.3' };")
    page.get_by_role("button", name="Update code").click()
    expect(page.locator("[data-code-error]")).to_contain_text("run")
    expect(page.locator("#code .ace-host")).to_contain_text("0.0.3")
    expect(page).to_have_url(here)
    page.reload()
    expect(page.locator("#code .ace-host")).to_contain_text("0.0.1")
    expect(page.locator("[data-code-error]")).to_have_count(0)
