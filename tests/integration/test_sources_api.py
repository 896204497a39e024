"""POST /v1/sources, run by hand, event summaries, db state, secrets, hooks."""

from __future__ import annotations

import asyncio
import json

import sqlalchemy as sa

from sluice.storage.tables import deployed_components, logs
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

COUNTER = """
export default {
  name: "Counter Source",
  version: "0.0.1",
  props: {
    db: "$.service.db",
    step: { type: "integer", min: 1, max: 5, optional: true, default: 1 },
    label: { type: "string" },
    token: { type: "string", secret: true },
    http: "$.interface.http",
  },
  hooks: {
    async deploy() { this.db.set("hooks", ["deploy"]); this.$emit({ historical: true }); },
    async activate() { this.db.set("hooks", [...this.db.get("hooks"), "activate"]); },
  },
  methods: {
    emitEvent(n) { this.$emit({ n, label: this.label }, { id: String(n), summary: `n=${n}` }); },
  },
  async run(event) {
    const count = (this.db.get("count") || 0) + this.step;
    this.db.set("count", count);
    [count].forEach(this.emitEvent);
    console.log("token length", this.token.length, "endpoint", typeof this.http.endpoint);
    return { event, hooks: this.db.get("hooks") };
  },
};
"""


async def deploy(api: Api, code: str, **body: object) -> dict:
    response = await api.client.post("/v1/sources", json={"component_code": code, **body})
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_deploy_run_and_read_events(api: Api) -> None:
    source = await deploy(
        api, COUNTER, configured_props={"label": "L", "token": "s3cr3t-value-xyz", "step": "2"}
    )
    assert source["id"].startswith("dc_") and source["active"] is True
    assert source["name"] == "Counter Source" and source["name_slug"] == "counter-source"
    # Stored as given (no conversion: docs/api.md, "Configured values"); the runtime reads
    # the integer prop's "2" as 2 (the count below steps by 2).
    assert source["configured_props"]["step"] == "2"
    assert source["configured_props"]["token"] == {"secret": True}
    assert source["endpoint_url"].endswith(
        source["configured_props"]["http"]["endpoint_url"].rsplit("/", 1)[1]
    )
    assert "s3cr3t" not in json.dumps(source)

    runs = []
    for n in range(2):
        response = await api.client.post(
            f"/v1/sources/{source['id']}/run", json={"event": {"n": n}}
        )
        assert response.status_code == 200, response.text
        runs.append(response.json()["data"])
    assert all(r["ok"] for r in runs), runs
    assert runs[1]["value"] == {"event": {"n": 1}, "hooks": ["deploy", "activate"]}
    assert len(runs[1]["emitted"]) == 1
    assert any("token length 16" in log["msg"] for log in runs[0]["logs"])

    page = (
        await api.client.get(
            f"/v1/sources/{source['id']}/event_summaries", params={"expand": "event"}
        )
    ).json()
    assert page["page_info"]["count"] == 3 and page["page_info"]["total_count"] == 3
    events = page["data"]
    assert [e["event"] for e in events] == [
        {"n": 4, "label": "L"},
        {"n": 2, "label": "L"},
        {"historical": True},
    ]
    newest = events[0]
    assert newest["metadata"]["emitter_id"] == source["id"]
    assert newest["metadata"]["name"] == "" and newest["metadata"]["summary"] == "n=4"
    assert newest["metadata"]["id"] == "4"
    assert newest["id"] == f"{newest['indexed_at_ms']}-{newest['id'].split('-')[1]}"
    assert page["page_info"]["start_cursor"] == events[0]["id"]
    assert page["page_info"]["end_cursor"] == events[-1]["id"]
    # Without expand an event under 1 KB comes whole too; pagination with before/limit.
    short = (
        await api.client.get(
            f"/v1/sources/{source['id']}/event_summaries",
            params={"limit": 1, "before": events[0]["id"]},
        )
    ).json()
    assert [e["id"] for e in short["data"]] == [events[1]["id"]]
    assert short["data"][0]["event"] == events[1]["event"]
    assert "truncated" not in short["data"][0]


BIG = """
export default {
  name: "Big", version: "0.0.1",
  async run() { this.$emit({ title: "t", body: "é".repeat(5000), tail: 1 }, { summary: "big" }); },
};
"""


async def test_events_over_1kb_are_cut_unless_expanded(api: Api) -> None:
    """Pipedream: "The event data for events larger than 1KB may get truncated … pass
    ?expand=event" for the full event."""
    source = await deploy(api, BIG)
    assert (await api.client.post(f"/v1/sources/{source['id']}/run", json={})).status_code == 200
    summaries = f"/v1/sources/{source['id']}/event_summaries"
    (item,) = (await api.client.get(summaries)).json()["data"]
    assert item["truncated"] is True and item["metadata"]["summary"] == "big"
    event = item["event"]
    # The small fields whole, the large one cut (in whatever key order the database keeps).
    assert event["title"] == "t" and event["tail"] == 1
    assert event["body"].startswith("éé") and event["body"].endswith("…")
    assert len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()) <= 1024
    (full,) = (await api.client.get(summaries, params={"expand": "event"})).json()["data"]
    assert full["event"] == {"title": "t", "body": "é" * 5000, "tail": 1}
    assert "truncated" not in full


async def test_secrets_are_encrypted_at_rest_and_never_logged(api: Api) -> None:
    source = await deploy(
        api, COUNTER, configured_props={"label": "L", "token": "s3cr3t-value-xyz"}
    )
    await api.client.post(f"/v1/sources/{source['id']}/run", json={})
    async with api.platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(deployed_components).where(deployed_components.c.id == source["id"])
            )
        ).one()
        log_text = " ".join(
            r.msg
            for r in await conn.execute(
                sa.select(logs.c.msg).where(logs.c.emitter_id == source["id"])
            )
        )
    stored = json.dumps(dict(row._mapping))
    assert "s3cr3t" not in stored
    assert row.secret_props["token"].startswith("v1.")
    assert "s3cr3t" not in log_text
    read = await api.client.get(f"/v1/sources/{source['id']}")
    assert "s3cr3t" not in read.text


async def test_configured_props_are_checked(api: Api) -> None:
    # Refused: only what Pipedream refuses (a required prop left out, an unknown prop).
    cases = [
        ({"token": "t"}, "configured_props.label", "required"),
        ({"label": "L", "token": "t", "nope": 1}, "configured_props.nope", "unknown prop"),
    ]
    for props, field, words in cases:
        response = await api.client.post(
            "/v1/sources", json={"component_code": COUNTER, "configured_props": props}
        )
        body = assert_error(response, 400, "invalid_props")
        assert body["field"] == field, body
        assert words in body["error"], body
    # Values pass with the type they have: no range, type or options check, no conversion
    # (Pipedream passes them as given; docs/api.md, "Configured values").
    options = """
export default { name: "Opt", version: "1",
  props: { color: { type: "string", options: [{ label: "Red", value: "r" }, "g"] },
           flags: { type: "boolean[]", optional: true },
           step: { type: "integer", min: 1, max: 5, optional: true } },
  async run() { this.$emit({ color: this.color, flags: this.flags, step: this.step }); } };
"""
    ok = await deploy(
        api, options, configured_props={"color": {"r": 1}, "flags": ["yes", 1], "step": 9}
    )
    assert ok["configured_props"]["flags"] == ["yes", 1]
    assert ok["configured_props"]["color"] == {"r": 1}
    run = (await api.client.post(f"/v1/sources/{ok['id']}/run", json={})).json()["data"]
    assert run["ok"], run


async def test_inactive_deploy_runs_only_the_deploy_hook(api: Api) -> None:
    source = await deploy(api, COUNTER, active=False, configured_props={"label": "L", "token": "t"})
    assert source["active"] is False
    run = (await api.client.post(f"/v1/sources/{source['id']}/run", json={})).json()["data"]
    assert run["value"]["hooks"] == ["deploy"]


async def test_failing_hook_undoes_the_deploy(api: Api) -> None:
    code = """
export default { name: "Bad Hook", version: "1",
  hooks: { async deploy() { console.log("about to fail"); throw new TypeError("no webhook"); } },
  async run() {} };
"""
    response = await api.client.post("/v1/sources", json={"component_code": code})
    body = assert_error(response, 400, "hook_failed")
    assert "TypeError" in body["error"] and "no webhook" in body["error"]
    assert any("about to fail" in log["msg"] for log in body["details"]["logs"])
    async with api.platform.db.connect() as conn:
        count = (
            await conn.execute(
                sa.select(sa.func.count())
                .select_from(deployed_components)
                .where(
                    deployed_components.c.owner_id == api.account_id,
                    deployed_components.c.name == "Bad Hook",
                )
            )
        ).scalar()
    assert count == 0


async def test_names_become_unique_slugs(api: Api) -> None:
    code = 'export default { name: "Same Name!", version: "1", async run() {} };'
    slugs = [(await deploy(api, code))["name_slug"] for _ in range(3)]
    assert slugs == ["same-name", "same-name-2", "same-name-3"]
    named = await deploy(api, code, name="Custom")
    assert (named["name"], named["name_slug"]) == ("Custom", "custom")


async def test_concurrent_deploys_of_one_name_all_get_a_slug(api: Api) -> None:
    """Deploys racing for one name: each gets its own slug, none a 500 (on PostgreSQL the
    slug read and the insert of two transactions interleave; the loser retries its slug)."""
    code = 'export default { name: "Racing Name", version: "1", async run() {} };'
    saved = (await api.client.post("/v1/components", json={"component_code": code})).json()
    component_id = saved["data"]["id"]
    responses = await asyncio.gather(
        *(api.client.post("/v1/sources", json={"component_id": component_id}) for _ in range(6))
    )
    assert [r.status_code for r in responses] == [200] * 6, [r.text for r in responses]
    slugs = sorted(r.json()["data"]["name_slug"] for r in responses)
    assert slugs == sorted(["racing-name"] + [f"racing-name-{n}" for n in range(2, 7)])


async def test_run_errors_are_reported_and_logged(api: Api) -> None:
    code = """
export default { name: "Thrower", version: "1",
  async run() { this.$emit({ before: true }); null.boom; } };
"""
    source = await deploy(api, code)
    run = (await api.client.post(f"/v1/sources/{source['id']}/run", json={})).json()["data"]
    assert run["ok"] is False and run["error"]["code"] == "TypeError"
    assert "Cannot read properties of null" in run["error"]["message"]
    assert "/components/" not in run["error"]["stack"]
    # Sluice's own frames (its runtime's files and where they live) are never shown.
    assert "runtime/js" not in run["error"]["stack"] and ".mjs:" in run["error"]["stack"]
    assert len(run["emitted"]) == 1
    logs_page = (await api.client.get(f"/v1/sources/{source['id']}/logs")).json()["data"]
    assert any(entry["level"] == "error" and "TypeError" in entry["msg"] for entry in logs_page)


async def test_delete_runs_deactivate_and_removes_everything(api: Api) -> None:
    code = """
export default { name: "Deactivating", version: "1", props: { db: "$.service.db" },
  hooks: { async deactivate() { console.log("bye"); } },
  async run() { this.$emit({}); } };
"""
    source = await deploy(api, code)
    await api.client.post(f"/v1/sources/{source['id']}/run", json={})
    deleted = await api.client.delete(f"/v1/sources/{source['id']}")
    assert deleted.status_code == 200 and deleted.json() == {}
    assert_error(await api.client.get(f"/v1/sources/{source['id']}"), 404, "not_found")
    assert_error(
        await api.client.get(f"/v1/sources/{source['id']}/event_summaries"), 404, "not_found"
    )


async def test_a_source_whose_deactivate_hook_throws_is_still_deleted(api: Api) -> None:
    """The spec's Delete runs the hook, then deletes: a hook that always throws (a remote
    webhook that is gone) used to make the source impossible to delete."""
    code = """
export default { name: "Stuck", version: "1",
  hooks: { async deactivate() { throw new Error("remote webhook gone"); } },
  async run() {} };
"""
    source = await deploy(api, code)
    deleted = await api.client.delete(f"/v1/sources/{source['id']}")
    assert deleted.status_code == 200, deleted.text
    [warning] = deleted.json()["warnings"]
    assert "remote webhook gone" in warning and "deleted anyway" in warning
    assert_error(await api.client.get(f"/v1/sources/{source['id']}"), 404, "not_found")


async def test_timer_source_gets_its_schedule_and_a_timer_event(api: Api) -> None:
    code = """
export default { name: "Ticker", version: "1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } } },
  async run(event) { this.$emit({ event, timer: this.timer }); } };
"""
    source = await deploy(api, code, configured_props={"timer": {"intervalSeconds": 30}})
    assert source["configured_props"]["timer"] == {"cron": None, "interval_seconds": 30}
    run = (await api.client.post(f"/v1/sources/{source['id']}/run")).json()["data"]
    assert run["ok"], run
    page = (
        await api.client.get(
            f"/v1/sources/{source['id']}/event_summaries", params={"expand": "event"}
        )
    ).json()
    emitted = page["data"][0]["event"]
    assert emitted["timer"]["intervalSeconds"] == 30
    assert emitted["event"]["interval_seconds"] == 30
    assert isinstance(emitted["event"]["timestamp"], int)


async def test_events_and_logs_are_kept_within_retention(api: Api) -> None:
    from dataclasses import replace

    code = """
export default { name: "Chatty", version: "1",
  async run(event) { for (let i = 0; i < 3; i++) { console.log(`line ${event.n}.${i}`); this.$emit({ n: event.n, i }); } } };
"""
    source = await deploy(api, code)
    commit = api.platform.commit  # the writer of results applies the retention windows
    original = commit.settings
    commit.settings = replace(original, event_retention=4, log_retention=5)
    try:
        for n in range(3):
            await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
    finally:
        commit.settings = original
    page = (
        await api.client.get(
            f"/v1/sources/{source['id']}/event_summaries", params={"expand": "event"}
        )
    ).json()
    assert page["page_info"]["total_count"] == 4
    assert [e["event"] for e in page["data"]] == [
        {"n": 2, "i": 2},
        {"n": 2, "i": 1},
        {"n": 2, "i": 0},
        {"n": 1, "i": 2},
    ]
    lines = (await api.client.get(f"/v1/sources/{source['id']}/logs")).json()["data"]
    assert [entry["msg"] for entry in lines] == [
        "line 2.2",
        "line 2.1",
        "line 2.0",
        "line 1.2",
        "line 1.1",
    ]
