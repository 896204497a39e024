"""Deploying sources from the spec's addresses, and watching their events arrive live."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, expect

from tests.ui.conftest import Server

ALL_PROPS = """export default {
  key: "ui-all-props",
  name: "All props",
  version: "0.1.0",
  description: "Every prop type, for the deploy form.",
  props: {
    http: "$.interface.http",
    db: "$.service.db",
    label: { type: "string", label: "Label", description: "Shown in each event" },
    count: { type: "integer", min: 1, max: 10, default: 2, optional: true },
    loud: { type: "boolean", optional: true },
    tags: { type: "string[]", optional: true },
    color: { type: "string", options: ["red", "green"] },
    extra: { type: "object", optional: true },
  },
  async run(event) {
    this.$emit({ label: this.label, count: this.count, color: this.color, body: event.body },
      { summary: `${this.label} #${event.body && event.body.n}` });
  },
};
"""

SECRET = """export default {
  name: "Secret keeper",
  version: "0.0.1",
  props: {
    http: "$.interface.http",
    token: { type: "string", secret: true, label: "Token" },
  },
  async run(event) {
    this.$emit({ ...event, token_set: this.token.length > 0 }, { summary: "checked" });
  },
};
"""


def api_key(page: Page, name: str) -> str:
    page.goto("/settings/keys")
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create key").click()
    return page.locator("#new-key").inner_text()


def test_deploy_by_key_shows_the_form_and_events_arrive_live(page: Page, server: Server) -> None:
    key = api_key(page, "publisher")
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as api:
        published = api.post("/v1/components/registry", json={"component_code": ALL_PROPS})
        assert published.status_code == 200, published.text
    page.goto("/sources?action=create&key=ui-all-props")
    expect(page.get_by_role("heading", name="Deploy All props")).to_be_visible()
    count = page.get_by_label("count")
    assert count.get_attribute("min") == "1" and count.get_attribute("max") == "10"
    expect(count).to_have_value("2")  # the default
    page.get_by_label("color").select_option("green")
    count.fill("3")
    # A required prop left out: the API's check (Pipedream's: values pass as given, but a
    # required prop must be there), not the browser's.
    page.get_by_label("Label").evaluate("e => { e.removeAttribute('required'); }")
    page.get_by_role("button", name="Deploy").click()
    error = page.locator(".field.has-error")
    expect(error).to_contain_text("label")
    expect(page.get_by_label("color")).to_have_value('"green"')  # the other values kept (JSON)
    expect(page.get_by_label("count")).to_have_value("3")
    page.get_by_label("Label").fill("<img src=x onerror=alert(1)>")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#endpoint-url")).to_be_visible()
    endpoint = page.locator("#endpoint-url").inner_text()
    expect(page.locator("[data-live-status]")).to_have_text("live")
    with httpx.Client(timeout=60) as client:
        for n in (1, 2):
            assert client.post(endpoint, json={"n": n}).status_code == 200
            # Each arrives without a reload; the summary is text, never markup.
            expect(page.locator("[data-event-rows] tr")).to_have_count(n)
    first = page.locator("[data-event-rows] tr").first
    expect(first).to_contain_text("<img src=x onerror=alert(1)> #2")
    first.click()
    inspector = page.locator("[data-inspector]")
    expect(inspector.locator(".json-tree")).to_contain_text('color: "green"')
    expect(inspector.locator("[data-event-json]")).to_contain_text('"color": "green"')
    expect(inspector.locator("[data-event-json]")).to_contain_text('"count": 3')
    # The keyboard moves through the events.
    page.keyboard.press("ArrowDown")
    expect(inspector.locator("[data-event-json]")).to_contain_text('"n": 1')
    assert page.locator("img").count() == 0


def fetch_by_url(page: Page, url: str) -> None:
    """The spec's deploy address by URL fills the form in; the user's own POST fetches."""
    page.goto(f"/sources?action=create&url={quote(url, safe='')}")
    expect(page.get_by_label("Component URL")).to_have_value(url)
    page.get_by_role("button", name="Fetch and configure").click()


def test_deploy_by_url_with_a_secret_prop(
    page: Page, server: Server, file_server: tuple[str, dict[str, str]]
) -> None:
    base, files = file_server
    files["/secret.mjs"] = SECRET
    fetch_by_url(page, base + "/secret.mjs")
    expect(page.get_by_role("heading", name="Deploy Secret keeper")).to_be_visible()
    token = page.get_by_label("Token")
    assert token.get_attribute("type") == "password"
    token.fill("s3cr3t-value")
    page.locator("#name").fill("keeper")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="keeper")).to_be_visible()
    assert "s3cr3t-value" not in page.content()
    expect(page.get_by_label("Token")).to_have_attribute(
        "placeholder", "(set: leave empty to keep it)"
    )
    endpoint = page.locator("#endpoint-url").inner_text()
    with httpx.Client(timeout=60) as client:
        client.post(endpoint, json={"hello": "world"}, headers={"X-Test": "yes"})
    row = page.locator("[data-event-rows] tr").first
    expect(row).to_contain_text("checked")
    row.click()
    raw = page.locator("[data-raw-request]")
    expect(raw).to_contain_text("POST /")
    expect(raw).to_contain_text("x-test: yes")
    # Saving the configuration with the secret left empty keeps it.
    page.locator("#name").fill("keeper 2")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="keeper 2")).to_be_visible()
    # Deactivate, then delete.
    page.get_by_role("button", name="Deactivate").click()
    expect(page.locator("h1 .badge")).to_have_text("inactive")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("link", name="keeper 2")).to_have_count(0)


def test_a_bad_url_is_named_on_its_field(page: Page) -> None:
    page.goto("/sources?action=create")
    page.get_by_label("Component URL").fill("ftp://example.test/x.mjs")
    page.get_by_role("button", name="Fetch and configure").click()
    expect(page.locator(".field-error")).to_contain_text("http")
    json.dumps({})


def test_a_link_to_the_deploy_address_by_url_fetches_nothing(
    page: Page, file_server: tuple[str, dict[str, str]]
) -> None:
    """A GET (a link or a redirect from any site carries the session cookie) must not fetch a
    file into the account and load its code there; only the form's POST with the CSRF token
    does."""
    base, files = file_server
    files["/lure.mjs"] = SECRET.replace("Secret keeper", "Lure")
    page.goto(f"/sources?action=create&url={quote(base + '/lure.mjs', safe='')}")
    expect(page.locator("[data-fetch-note]")).to_be_visible()
    mine = page.request.get("/v1/users/me/components").json()["data"]
    assert [c["name"] for c in mine if c["name"] == "Lure"] == []
    forged = page.request.post("/sources/fetch", form={"url": base + "/lure.mjs"})
    assert forged.status == 403  # no CSRF token
    page.get_by_role("button", name="Fetch and configure").click()
    expect(page.get_by_role("heading", name="Deploy Lure")).to_be_visible()
    mine = page.request.get("/v1/users/me/components").json()["data"]
    assert [c["name"] for c in mine if c["name"] == "Lure"] == ["Lure"]


ASYNC_OPTIONS = """export default {
  name: "Picker",
  version: "0.0.1",
  props: {
    region: { type: "string", options: ["eu", "us"] },
    channel: {
      type: "string",
      label: "Channel",
      useQuery: true,
      async options({ query, page, prevContext }) {
        const all = [`${this.region}-general`, `${this.region}-random`, `${this.region}-ops`];
        const found = all.filter((c) => !query || c.includes(query));
        const start = page === 0 ? 0 : prevContext.next;  // pages of two, by context
        const options = found.slice(start, start + 2).map((c) => ({ label: `#${c}`, value: c }));
        return { options, context: start + 2 < found.length ? { next: start + 2 } : null };
      },
    },
  },
  async run(event) { console.log("picked", this.channel); this.$emit({ channel: this.channel, event }); },
};
"""


def test_async_options_use_the_values_so_far_and_the_query(
    page: Page, file_server: tuple[str, dict[str, str]]
) -> None:
    base, files = file_server
    files["/picker.mjs"] = ASYNC_OPTIONS
    fetch_by_url(page, base + "/picker.mjs")
    page.get_by_label("region").select_option("us")
    channel = page.locator("#prop-channel")
    expect(channel.locator("option")).to_have_text(["Choose…", "#us-general", "#us-random"])
    page.get_by_role("button", name="More options").click()
    expect(channel.locator("option")).to_have_text(
        ["Choose…", "#us-general", "#us-random", "#us-ops"]
    )
    expect(page.get_by_role("button", name="More options")).to_have_count(0)
    page.get_by_label("Search the options of Channel").fill("op")
    expect(channel.locator("option")).to_have_text(["Choose…", "#us-ops"])
    channel.select_option(label="#us-ops")
    page.get_by_role("button", name="Deploy").click()
    expect(page.get_by_role("heading", name="Picker")).to_be_visible()
    # Run by hand through the API with the page's session (a read-only page cannot run it):
    # the logs arrive live too.
    source_id = page.url.rsplit("/", 1)[1]
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    answer = page.request.post(
        f"/v1/sources/{source_id}/run",
        data={"event": {"x": 1}},
        headers={"X-CSRF-Token": token or ""},
    )
    assert answer.ok, answer.text()
    expect(page.locator("[data-log-lines]")).to_contain_text("picked us-ops")
    expect(page.locator("[data-event-rows] tr")).to_have_count(1)


def test_the_test_request_form_and_another_accounts_source(
    page: Page, server: Server, browser, file_server: tuple[str, dict[str, str]]
) -> None:
    base, files = file_server
    files["/echo.mjs"] = SECRET
    fetch_by_url(page, base + "/echo.mjs")
    page.get_by_label("Token").fill("t")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#endpoint-url")).to_be_visible()
    page.get_by_text("Send a test request").click()
    page.get_by_label("JSON body").fill('{"from": "the form"}')
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.locator("output[name=result]")).to_have_text("200 OK")
    expect(page.locator("[data-event-rows] tr")).to_have_count(1)
    source_url = page.url
    # Another account sees none of it, in the pages or through /v1 with its cookie.
    from tests.ui.conftest import run_cli

    run_cli(
        "accounts",
        "create",
        "--name",
        "eve",
        "--password",
        data_dir=server.data_dir,
        stdin="eve's password\neve's password\n",
    )
    other = browser.new_context(base_url=server.url)
    eve = other.new_page()
    eve.goto("/login")
    eve.get_by_label("Username or e-mail").fill("eve")
    eve.get_by_label("Password").fill("eve's password")
    eve.get_by_role("button", name="Log in").click()
    expect(eve.get_by_text("No sources yet")).to_be_visible()
    assert eve.goto(source_url).status == 404
    expect(eve.get_by_role("heading", level=1)).to_contain_text("404: not_found")
    assert (
        eve.request.get(source_url.replace("/sources/", "/v1/sources/") + "/event_summaries").status
        == 404
    )
    other.close()


PAGE_SERVER = """export default {
  name: "Page server",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run() {
    const script = `(async () => {
      let out, jar;
      try {
        const r = await fetch("/v1/users/me", { credentials: "include" });
        out = "read " + r.status + " " + (await r.text()).slice(0, 60);
      } catch (e) { out = "blocked " + e.name; }
      try { jar = "cookies " + document.cookie; } catch (e) { jar = "no cookies"; }
      document.title = "done|" + out + "|" + jar;
    })();`;
    await this.http.respond({
      status: 200,
      headers: { "Content-Type": "text/html", "Set-Cookie": "sluice_session=planted; Path=/" },
      body: `<!doctype html><title>start</title><script>${script}</script>`,
    });
  },
};
"""


def test_a_page_an_endpoint_serves_cannot_act_as_the_signed_in_user(
    page: Page, server: Server
) -> None:
    """Endpoints answer on the web UI's origin. A page one serves runs sandboxed, in an origin
    of its own: a signed-in visitor's session is neither readable nor usable by its script,
    and the answer cannot replace the session cookie (login CSRF)."""
    key = api_key(page, "sandbox")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        made = client.post(
            "/v1/sources",
            json={"component_code": PAGE_SERVER},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert made.status_code == 200, made.text
    endpoint = made.json()["data"]["endpoint_url"]
    page.goto(endpoint)
    expect(page).to_have_title(re.compile(r"^done\|"))
    _, fetched, jar = page.title().split("|")
    assert fetched.startswith("blocked"), fetched  # not "read 200 {…the user…}"
    assert jar == "no cookies"
    # Still signed in as the owner, with the session the browser had.
    page.goto("/sources")
    expect(page.get_by_role("heading", name="Sources")).to_be_visible()
