"""Core components: shipped in the package, in the registry of every install from its first
start, published again only when their code changes (a new version), and each doing what its
Pipedream namesake does: the webhook source, schedules, RSS, and the core actions."""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from sluice.api.app import serving
from sluice.engine.components import core_components
from sluice.engine.components.core_components import CoreComponents
from sluice.platform import Platform
from sluice.storage import accounts
from tests.conftest import Api, account_client
from tests.integration.test_destinations import HttpServer, http_server

#: Every key Sluice ships, as docs/components.md lists them.
KEYS = {
    "http-new-requests",
    "http-custom-request",
    "schedule-custom-interval",
    "schedule-daily",
    "schedule-weekly",
    "schedule-monthly",
    "rss-new-item-in-feed",
    "delay-delay-workflow",
    "filter-continue-based-on-condition",
    "filter-end-based-on-condition",
    "formatting-transform-case",
    "formatting-replace-text",
    "formatting-parse-json",
    "formatting-convert-json-to-string",
    "data_stores-get-record",
    "data_stores-add-update-record",
    "email-new-messages",
}


async def test_every_shipped_component_is_in_the_registry(api: Api) -> None:
    listed = await api.client.get("/v1/components/registry", params={"limit": 100})
    assert listed.status_code == 200, listed.text
    keys = {c["key"] for c in listed.json()["data"]}
    assert keys >= KEYS
    shipped = core_components.shipped()
    assert len(shipped) == len(KEYS)
    one = (await api.client.get("/v1/components/registry/http-new-requests")).json()["data"]
    assert [p["name"] for p in one["configurable_props"]] == [
        "httpInterface",
        "emitBodyOnly",
        "resStatusCode",
        "resContentType",
        "resBody",
    ]
    # Not a person: a fresh install still asks for its owner, nobody logs in as it.
    async with api.platform.db.connect() as conn:
        system = await accounts.get(conn, accounts.SYSTEM_ID)
    assert system is not None and system.email is None


async def test_seeding_again_changes_nothing(platform: Platform) -> None:
    report = await CoreComponents(platform.db, platform.components, platform.clock).seed()
    assert {r.outcome for r in report} == {"present"}, report


def _demo(version: str, name: str, answer: str) -> str:
    key = "demo-" + name.lower().replace(" ", "-")
    return f"""
export default {{
  key: "{key}", name: "{name}", version: "{version}", type: "action",
  props: {{}},
  async run() {{ return "{answer}"; }},
}};
"""


async def test_new_code_is_published_as_its_new_version(platform: Platform, tmp_path: Path) -> None:
    name = f"Thing {secrets.token_hex(3)}"
    key = "demo-" + name.lower().replace(" ", "-")
    entry = tmp_path / "demo" / "actions" / "x" / "x.mjs"
    entry.parent.mkdir(parents=True)
    seeder = CoreComponents(platform.db, platform.components, platform.clock, root=tmp_path)

    entry.write_text(_demo("0.1.0", name, "one"))
    (first,) = await seeder.seed()
    assert (first.outcome, first.key, first.version) == ("published", key, "0.1.0")
    (again,) = await seeder.seed()
    assert again.outcome == "present"
    # Changed code under the same version is not published: a version is immutable.
    entry.write_text(_demo("0.1.0", name, "changed"))
    (kept,) = await seeder.seed()
    assert kept.outcome == "kept" and "newer version" in (kept.reason or "")
    entry.write_text(_demo("0.2.0", name, "two"))
    (upgraded,) = await seeder.seed()
    assert (upgraded.outcome, upgraded.version) == ("published", "0.2.0")
    versions = await platform.registry_versions(key)
    assert sorted(c.version for c in versions) == ["0.1.0", "0.2.0"]
    assert {c.owner_id for c in versions} == {accounts.SYSTEM_ID}


# --- what each one does ---------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def public(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(api.platform)),
        base_url="http://sluice.test",
        timeout=60,
    ) as client:
        yield client


async def _deploy(api: Api, key: str, props: dict[str, Any]) -> dict[str, Any]:
    made = await api.client.post(
        "/v1/sources", json={"component_key": key, "configured_props": props}
    )
    assert made.status_code == 200, made.text
    data: dict[str, Any] = made.json()["data"]
    return data


async def _events(api: Api, source_id: str) -> list[dict[str, Any]]:
    page = await api.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"}
    )
    assert page.status_code == 200, page.text
    return list(reversed(page.json()["data"]))


async def test_http_new_requests_full_request_and_custom_answer(
    api: Api, public: httpx.AsyncClient
) -> None:
    source = await _deploy(
        api,
        "http-new-requests",
        {"resStatusCode": "202", "resBody": "<b>thanks</b>", "resContentType": "text/html"},
    )
    path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
    answer = await public.post(f"{path}/hook?x=1", json={"order": 7})
    assert (answer.status_code, answer.text) == (202, "<b>thanks</b>")
    assert answer.headers["content-type"].startswith("text/html")
    await api.platform.ingress.idle()
    (item,) = await _events(api, source["id"])
    event = item["event"]
    assert (event["method"], event["path"], event["query"]) == ("POST", "/hook", {"x": "1"})
    assert event["body"] == {"order": 7} and event["bodyRaw"] == '{"order":7}'
    assert item["metadata"]["summary"] == "POST /hook"


async def test_http_new_requests_body_only_with_the_default_answer(
    api: Api, public: httpx.AsyncClient
) -> None:
    source = await _deploy(api, "http-new-requests", {"emitBodyOnly": True})
    path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
    answer = await public.post(path, json={"order": 8})
    assert answer.status_code == 200 and answer.json() == {"success": True}
    await api.platform.ingress.idle()
    assert [e["event"] for e in await _events(api, source["id"])] == [{"order": 8}]


async def test_schedules_take_a_cron_in_a_time_zone(api: Api) -> None:
    daily = await _deploy(
        api, "schedule-daily", {"cron": {"cron": "30 8 * * *", "timezone": "Europe/Paris"}}
    )
    timer = daily["configured_props"]["cron"]
    assert (timer["cron"], timer["timezone"]) == ("30 8 * * *", "Europe/Paris")
    every = await _deploy(api, "schedule-custom-interval", {})
    assert every["configured_props"]["cron"]["interval_seconds"] == 900
    tick = {"timestamp": 1767225600, "interval_seconds": 900}
    ran = await api.client.post(f"/v1/sources/{every['id']}/run", json={"event": tick})
    assert ran.status_code == 200, ran.text
    (item,) = await _events(api, every["id"])
    assert item["event"] == tick
    assert item["metadata"]["summary"] == "Tick at 2026-01-01T00:00:00.000Z"


# --- with a loopback server the egress rules let through ----------------------------------

FEED = b"""<?xml version="1.0"?>
<rss version="2.0"><channel><title>News</title>
<item><title>Second &amp; last</title><link>https://example.com/2</link><guid>n-2</guid>
  <pubDate>Tue, 03 Nov 2026 10:00:00 GMT</pubDate><description><![CDATA[<p>two</p>]]></description></item>
<item><title>First</title><link>https://example.com/1</link><guid>n-1</guid>
  <pubDate>Mon, 02 Nov 2026 10:00:00 GMT</pubDate><category>a</category></item>
</channel></rss>"""


@dataclasses.dataclass
class Env:
    api: Api
    server: HttpServer


@pytest_asyncio.fixture(loop_scope="session")
async def env(platform: Platform) -> AsyncIterator[Env]:
    async with http_server() as server:
        settings = dataclasses.replace(platform.settings, egress_allow=f"127.0.0.1:{server.port}")
        async with (
            Platform.open(settings, background=False) as opened,
            account_client(opened, "core") as api,
        ):
            yield Env(api, server)


async def test_rss_emits_each_new_item_once(env: Env) -> None:
    env.server.body, env.server.content_type = FEED, "application/rss+xml"
    source = await _deploy(env.api, "rss-new-item-in-feed", {"url": f"{env.server.url}/feed"})
    for _ in range(2):  # the second read finds nothing new: dedupe "unique" on the guid
        ran = await env.api.client.post(f"/v1/sources/{source['id']}/run", json={})
        assert ran.status_code == 200, ran.text
    items = await _events(env.api, source["id"])
    assert [i["event"]["title"] for i in items] == ["First", "Second & last"]
    second = items[1]["event"]
    assert second["link"] == "https://example.com/2" and second["guid"] == "n-2"
    assert second["description"] == "<p>two</p>"
    assert second["pubdate"] == "2026-11-03T10:00:00.000Z"
    assert items[0]["event"]["categories"] == ["a"]


async def test_rss_refuses_a_page_that_is_not_a_feed(env: Env) -> None:
    env.server.body, env.server.content_type = b"<html>hi</html>", "text/html"
    made = await env.api.client.post(
        "/v1/sources",
        json={"component_key": "rss-new-item-in-feed", "configured_props": {"url": env.server.url}},
    )
    assert made.status_code >= 400 and "not an RSS or Atom feed" in made.text


async def _action(api: Api, key: str, props: dict[str, Any]) -> dict[str, Any]:
    ran = await api.client.post(
        "/v1/actions/run", json={"component_key": key, "configured_props": props}
    )
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


async def test_custom_request_sends_and_returns_the_parsed_answer(env: Env) -> None:
    env.server.body, env.server.content_type = b'{"ok": true}', "application/json"
    env.server.status = 200
    data = await _action(
        env.api,
        "http-custom-request",
        {
            "url": f"{env.server.url}/hook",
            "method": "POST",
            "data": {"name": "Ada"},
            "params": {"q": "a b"},
            "headers": {"X-Trace": "t-1"},
            "auth": "ada:secret",
        },
    )
    assert data["ok"] and data["ret"] == {"ok": True}
    assert data["summary"] == f"POST 127.0.0.1:{env.server.port}/hook: HTTP 200"
    sent = env.server.received[-1]
    assert (sent.method, sent.target) == ("POST", "/hook?q=a+b")
    assert json.loads(sent.body) == {"name": "Ada"}
    assert sent.headers["x-trace"] == "t-1" and sent.headers["authorization"].startswith("Basic ")
    env.server.status = 503
    failed = await _action(env.api, "http-custom-request", {"url": env.server.url})
    assert not failed["ok"] and "HTTP 503" in failed["error"]["message"]
    env.server.status = 200


async def test_filters_end_the_run_or_let_it_continue(api: Api) -> None:
    go = await _action(
        api,
        "filter-continue-based-on-condition",
        {"operand1": "Paid", "condition": "equals", "operand2": "paid"},
    )
    assert go["ok"] and go["flow_exit"] is None and go["ret"] == {"met": True}
    stop = await _action(
        api,
        "filter-continue-based-on-condition",
        {"operand1": 3, "condition": "greater_than", "operand2": 5},
    )
    assert stop["ok"] and "not met" in stop["flow_exit"]["reason"]
    end = await _action(
        api, "filter-end-based-on-condition", {"operand1": "", "condition": "not_exists"}
    )
    assert end["flow_exit"] is not None


async def test_formatting(api: Api) -> None:
    case = await _action(
        api, "formatting-transform-case", {"input": "hello big World", "operation": "snake_case"}
    )
    assert case["ret"] == "hello_big_world"
    replaced = await _action(
        api,
        "formatting-replace-text",
        {"input": "a1b22c", "findText": "/\\d+/g", "replaceText": "-"},
    )
    assert replaced["ret"] == "a-b-c" and replaced["summary"] == "Replaced 2 occurrences"
    parsed = await _action(api, "formatting-parse-json", {"input": '{"a": [1, 2]}'})
    assert parsed["ret"] == {"a": [1, 2]}
    bad = await _action(api, "formatting-parse-json", {"input": "{nope"})
    assert not bad["ok"] and "not valid JSON" in bad["error"]["message"]
    text = await _action(api, "formatting-convert-json-to-string", {"input": {"b": 1}})
    assert text["ret"] == '{"b":1}'


async def test_data_store_set_then_get(api: Api) -> None:
    made = await api.client.post("/v1/data_stores", json={"name": "core-test"})
    assert made.status_code == 200, made.text
    store = {"dataStore": "core-test"}
    missing = await _action(api, "data_stores-get-record", {**store, "key": "k"})
    assert missing["ok"] and missing["ret"] is None
    added = await _action(
        api, "data_stores-add-update-record", {**store, "key": "k", "value": '{"n": 1}'}
    )
    assert added["ret"] == {"key": "k", "value": {"n": 1}}
    found = await _action(api, "data_stores-get-record", {**store, "key": "k"})
    assert found["ret"] == {"n": 1} and found["summary"] == "Found data for the key `k`"
    created = await _action(
        api,
        "data_stores-get-record",
        {**store, "key": "new", "addRecordIfNotFound": True, "value": "v"},
    )
    assert created["ret"] == "v"
