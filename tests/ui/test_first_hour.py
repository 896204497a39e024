"""Issue 26's "Done when", as one newcomer's first hour in the browser, on SQLite and on
PostgreSQL: a fresh install's owner made on the first-run page; in the builder, a webhook
trigger (Pipedream's HTTP trigger with "Return a custom response from your workflow") → a code
step importing an npm package → the core HTTP request action posting to a loopback receiver →
a step answering with ``$.respond``; each step tested on a generated test event before any
deploy; deploy, call the endpoint and get the answer; then a deployed source
(``http-new-requests``) has its code edited on its page. No CLI, no API key, no /v1 call.

Why the workflow's trigger is the builder's HTTP trigger and not a deployed
``http-new-requests`` source: a source answers its own requests (its configured status and
body, as Pipedream's source does), so a workflow listening to its events cannot answer the
caller with ``$.respond``; Pipedream's builder also gives the workflow its own HTTP trigger for
that."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.ui.conftest import Server, create_owner, database_name, serve_on
from tests.ui.test_source_code import type_code
from tests.ui.test_workflows import set_code


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A fresh install on each database: no account yet."""
    data_dir = tmp_path_factory.mktemp(f"ui-first-hour-{request.param}")
    with serve_on(request.param, data_dir, database_name("hour")) as running:
        yield running


class _Receiver(http.server.BaseHTTPRequestHandler):
    got: list[dict[str, object]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.got.append({"path": self.path, "body": json.loads(body or b"null")})
        answer = json.dumps({"received": len(self.got)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A loopback HTTP server that records what is posted to it: ``(url, requests)``."""
    got: list[dict[str, object]] = []
    handler = type("Receiver", (_Receiver,), {"got": got})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", got
    httpd.shutdown()
    httpd.server_close()


NPM_STEP = """import isOdd from "is-odd@3.0.1";
export default defineComponent({
  async run({ steps, $ }) {
    const n = steps.trigger.event.body.n;
    console.log("checking", n);
    $.export("odd", isOdd(n));
    return { n, odd: isOdd(n) };
  },
});
"""

RESPOND_STEP = """export default defineComponent({
  async run({ steps, $ }) {
    await $.respond({
      status: 201,
      body: { n: steps.step_1.$return_value.n, odd: steps.step_1.odd, receiver: steps.step_2.$return_value },
    });
  },
});
"""


def test_a_newcomers_first_hour(
    browser: Browser, server: Server, receiver: tuple[str, list[dict[str, object]]]
) -> None:
    receiver_url, received = receiver
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(msg.text)
            if msg.type == "error" and "Content Security Policy" in msg.text
            else None
        ),
    )

    # A fresh install: the first visit makes the owner.
    page.goto("/")
    expect(page).to_have_url(f"{server.url}/setup")
    create_owner(page, "newcomer")

    # The builder: a webhook trigger that the workflow answers.
    page.get_by_role("link", name="Workflows").first.click()
    page.get_by_role("link", name="New workflow").click()
    page.get_by_label("Name", exact=True).fill("First hour")
    page.get_by_label("HTTP request").check()
    page.get_by_label("Respond with").check()
    page.get_by_role("button", name="Generate a test event").click()
    test_event = page.get_by_label("Test event")
    generated = json.loads(test_event.input_value())
    assert generated["method"] == "POST"
    test_event.fill(json.dumps({**generated, "body": {"n": 7}}))

    # 1. A code step with an npm package, tested.
    set_code(page, 0, NPM_STEP)
    step1 = page.locator("[data-step]").nth(0)
    step1.get_by_role("button", name="Test").click()
    expect(step1.locator("[data-test-status]")).to_have_text("success")
    expect(step1.locator("[data-test-exports]")).to_contain_text('"odd": true')
    expect(step1.locator("[data-test-logs]")).to_contain_text("checking 7")

    # 2. The HTTP request action, posting to the receiver, tested (it really posts).
    page.get_by_role("button", name="+ Action step").click()
    step2 = page.locator("[data-step]").nth(1)
    step2.locator("summary", has_text="Browse actions").click()
    step2.get_by_label("Find by name, app or description").fill("http request")
    step2.locator("[data-action-entry]:visible").first.get_by_role("button").click()
    expect(step2.locator("input[name='step.action']")).to_have_value("http-custom-request")
    step2.get_by_label("URL").fill(receiver_url)
    step2.get_by_label("Method").select_option(label="POST")
    step2.get_by_label("Body").fill('{"from": "first-hour"}')
    step2.get_by_role("button", name="Test").click()
    expect(step2.locator("[data-test-status]")).to_have_text("success")
    expect(step2.locator("details[open] [data-test-return]")).to_contain_text('"received": 1')
    assert received == [{"path": "/hook", "body": {"from": "first-hour"}}]

    # 3. A step answering the caller with $.respond, tested: the answer is shown.
    page.get_by_role("button", name="+ Code step").click()
    set_code(page, 2, RESPOND_STEP)
    step3 = page.locator("[data-step]").nth(2)
    step3.get_by_role("button", name="Test").click()
    expect(step3.locator("[data-test-status]")).to_have_text("success")
    expect(step3.locator("[data-test-response]")).to_contain_text("201")
    expect(step3.locator("[data-test-response]")).to_contain_text('"odd": true')

    # Deploy, call the endpoint, get the workflow's answer.
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="First hour")).to_be_visible()
    endpoint = page.locator(".endpoint code").inner_text()
    with httpx.Client(timeout=60) as client:
        answer = client.post(endpoint, json={"n": 4})
    assert answer.status_code == 201, answer.text
    # Step 3's Test ran steps 1 to 3, so the receiver had two posts before this run's.
    assert answer.json() == {"n": 4, "odd": False, "receiver": {"received": 3}}
    assert len(received) == 3
    expect(page.locator("[data-runs] tbody tr")).to_have_count(1)  # the tests were not runs

    # A deployed source's code, edited on its page: the webhook source of the registry.
    page.get_by_role("link", name="Registry").first.click()
    page.get_by_label("Search").fill("http-new-requests")
    page.get_by_label("Search").press("Enter")
    page.locator("li.card", has_text="http-new-requests").get_by_role("link", name="Deploy").click()
    page.locator("#name").fill("first-hook")
    page.get_by_role("button", name="Deploy").click()
    hook = page.locator("#endpoint-url")
    expect(hook).to_be_visible()
    hook_url = hook.inner_text()
    with httpx.Client(timeout=60) as client:
        assert client.post(hook_url, json={"a": 1}).json() == {"success": True}
        code = page.locator("#code .ace-host").evaluate("el => ace.edit(el).getValue()")
        assert 'version: "0.1.0"' in code and 'body: this.resBody ?? "",' in code
        edited = code.replace('version: "0.1.0"', 'version: "0.1.1"').replace(
            'body: this.resBody ?? "",', "body: { edited: true, got: event.body },"
        )
        type_code(page, "#code", edited)
        page.get_by_role("button", name="Update code").click()
        expect(page.locator("[data-update-result]")).to_contain_text("now runs New Requests 0.1.1")
        expect(page.locator("#endpoint-url")).to_have_text(hook_url)
        assert client.post(hook_url, json={"a": 2}).json() == {"edited": True, "got": {"a": 2}}
    expect(page.locator("[data-event-rows] tr")).to_have_count(2)
    context.close()
    assert not problems, problems
