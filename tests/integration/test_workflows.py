"""Workflows over REST: definitions, manual runs, step data flow, errors and their list,
forwarding to subscribers and to the global error workflow, replays, isolation. Jobs (forwarded
errors, sends) are driven with ``platform.jobs.drain()``; every run is real Node."""

from __future__ import annotations

import email
import email.policy
from pathlib import Path
from typing import Any

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error


def step(name: str, body: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
    code = f"export default defineComponent({{ {body} }});"
    out: dict[str, Any] = {"name": name, "code": code}
    if props is not None:
        out["props"] = props
    return out


DOUBLE = step(
    "double",
    'async run({ steps, $ }) { console.log("n is", steps.trigger.event.n); '
    '$.export("note", "doubled"); return { value: steps.trigger.event.n * 2 }; }',
)
ADD = step(
    "add",
    'props: { amount: { type: "integer" }, label: { type: "string" } }, '
    "async run({ steps }) { return { sum: this.amount + 1, label: this.label, "
    "note: steps.double.note }; }",
    {"amount": "{{steps.double.$return_value.value}}", "label": "n={{event.n}}"},
)
THROWS = step("boom", "async run({ steps }) { return steps.trigger.event.missing.field; }")
CATCHES = step(
    "careful",
    'async run() { try { JSON.parse("{"); } catch (err) { return `caught ${err.name}`; } }',
)
EXITS = step("stop", 'async run({ $ }) { return $.flow.exit("nothing to do"); }')
NEVER = step("never", 'async run() { throw new Error("must not run"); }')


async def create(api: Api, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = {"name": extra.pop("name", "wf"), "trigger": {"type": "manual"}, "steps": steps}
    body.update(extra)
    response = await api.client.post("/v1/workflows", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def run(api: Api, workflow_id: str, event: Any) -> dict[str, Any]:
    response = await api.client.post(f"/v1/workflows/{workflow_id}/runs", json={"event": event})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def errors_of(api: Api, workflow_id: str, **params: Any) -> dict[str, Any]:
    response = await api.client.get(
        f"/v1/workflows/{workflow_id}/$errors/event_summaries", params=params
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def error_workflow_runs(api: Api) -> list[dict[str, Any]]:
    ew = (await api.client.get("/v1/users/me/error_workflow")).json()["data"]["workflow_id"]
    page = (await api.client.get(f"/v1/workflows/{ew}/runs", params={"limit": 100})).json()
    runs: list[dict[str, Any]] = page["data"]
    return runs


async def test_steps_pass_data_and_the_run_is_stored(api: Api) -> None:
    workflow = await create(api, [DOUBLE, ADD, CATCHES], name="math")
    assert workflow["id"].startswith("p_") and workflow["deployment_id"].startswith("d_")
    assert [s["name"] for s in workflow["steps"]] == ["double", "add", "careful"]
    assert all(s["id"].startswith("c_") for s in workflow["steps"])

    result = await run(api, workflow["id"], {"n": 21})
    assert result["status"] == "success" and result["error"] is None
    double, add, careful = result["steps"]
    assert double["return_value"] == {"value": 42}
    assert double["exports"] == {"note": "doubled"}
    assert [(line["level"], line["msg"]) for line in double["logs"]] == [("log", "n is 21")]
    assert add["return_value"] == {"sum": 43, "label": "n=21", "note": "doubled"}
    assert careful["return_value"] == "caught SyntaxError"
    assert all(s["status"] == "success" and s["duration_ms"] >= 0 for s in result["steps"])
    context = result["context"]
    assert context["workflow_id"] == workflow["id"]
    assert context["deployment_id"] == workflow["deployment_id"]
    assert context["owner_id"] == api.account_id and context["source_type"] == "MANUAL"

    stored = (await api.client.get(f"/v1/runs/{result['id']}")).json()["data"]
    assert stored["steps"] == result["steps"] and stored["event"] == {"n": 21}
    listing = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()
    assert listing["page_info"]["total_count"] == 1
    assert [r["id"] for r in listing["data"]] == [result["id"]]


async def test_runs_are_listed_newest_first_and_replayed(api: Api) -> None:
    workflow = await create(api, [DOUBLE])
    ids = [(await run(api, workflow["id"], {"n": n}))["id"] for n in range(3)]
    page = (
        await api.client.get(f"/v1/workflows/{workflow['id']}/runs", params={"limit": 2})
    ).json()
    assert [r["id"] for r in page["data"]] == [ids[2], ids[1]]
    assert page["page_info"]["total_count"] == 3
    after = page["page_info"]["end_cursor"]
    rest = (
        await api.client.get(f"/v1/workflows/{workflow['id']}/runs", params={"after": after})
    ).json()
    assert [r["id"] for r in rest["data"]] == [ids[0]]

    replay = await api.client.post(f"/v1/runs/{ids[1]}/replay")
    assert replay.status_code == 200, replay.text
    again = replay.json()["data"]
    assert again["replay_of"] == ids[1] and again["id"] not in ids
    assert again["event"] == {"n": 1} and again["steps"][0]["return_value"] == {"value": 2}
    assert again["context"]["replay"] is True


async def test_flow_exit_ends_the_run_successfully(api: Api) -> None:
    workflow = await create(api, [EXITS, NEVER])
    result = await run(api, workflow["id"], {})
    assert result["status"] == "exited" and result["error"] is None
    assert result["flow_exit"] == {"reason": "nothing to do"}
    assert [s["name"] for s in result["steps"]] == ["stop"]
    assert (await errors_of(api, workflow["id"]))["data"] == []


async def test_a_thrown_error_is_listed_with_its_event(api: Api) -> None:
    workflow = await create(api, [DOUBLE, THROWS, NEVER], name="fails")
    boom_id = workflow["steps"][1]["id"]
    result = await run(api, workflow["id"], {"n": 1})
    assert result["status"] == "error"
    assert [s["status"] for s in result["steps"]] == ["success", "error"]
    error = result["error"]
    assert error["code"] == "TypeError" and error["cellId"] == boom_id
    assert "reading 'field'" in error["msg"]
    assert "step.mjs" in error["stack"] and "/work/" not in error["stack"]
    assert error["ts"].endswith("Z") and len(error["ts"]) == 24

    page = await errors_of(api, workflow["id"], expand="event")
    assert page["page_info"]["count"] == 1 and page["page_info"]["total_count"] == 1
    [item] = page["data"]
    assert page["page_info"]["start_cursor"] == item["id"] == page["page_info"]["end_cursor"]
    assert item["indexed_at_ms"] == int(item["id"].split("-")[0])
    assert item["metadata"]["emitter_id"] == workflow["id"]
    assert item["metadata"]["name"] == "$errors" and item["metadata"]["emit_id"]
    event = item["event"]
    assert event["original_event"] == {"n": 1}
    assert {k: event["error"][k] for k in ("code", "cellId", "ts", "stack")} == {
        k: error[k] for k in ("code", "cellId", "ts", "stack")
    }
    context = event["original_context"]
    assert set(context) >= {
        "id",
        "ts",
        "workflow_id",
        "deployment_id",
        "source_type",
        "verified",
        "owner_id",
        "platform_version",
    }
    assert context["id"] == result["id"] and context["verified"] is False
    assert context["owner_id"].startswith("u_")
    assert [int(p) for p in context["platform_version"].split(".")]

    plain = await errors_of(api, workflow["id"])
    assert "event" not in plain["data"][0]
    assert plain["data"][0]["error"] == {k: error[k] for k in ("code", "msg", "cellId", "ts")}


async def test_the_error_list_pages_and_keeps_the_newest_100(api: Api) -> None:
    # Errors are stored by the runs; 3 runs then paging by cursor.
    workflow = await create(api, [THROWS])
    for _ in range(3):
        await run(api, workflow["id"], {})
    page = await errors_of(api, workflow["id"], limit=2)
    assert page["page_info"]["count"] == 2 and page["page_info"]["total_count"] == 3
    first, second = page["data"]
    position = [tuple(int(p) for p in i["id"].split("-")) for i in (first, second)]
    assert position[0] > position[1]  # newest first
    # Event ids are times: before an id are the older errors, after it the newer ones.
    older = await errors_of(api, workflow["id"], before=page["page_info"]["end_cursor"])
    assert len(older["data"]) == 1 and older["data"][0]["id"] not in (first["id"], second["id"])
    newer = await errors_of(api, workflow["id"], after=second["id"])
    assert [i["id"] for i in newer["data"]] == [first["id"]]
    bad = await api.client.get(
        f"/v1/workflows/{workflow['id']}/$errors/event_summaries", params={"limit": 101}
    )
    assert_error(bad, 400, "invalid_request")
    bad = await api.client.get(
        f"/v1/workflows/{workflow['id']}/$errors/event_summaries", params={"expand": "x"}
    )
    assert_error(bad, 400, "invalid_request")


async def test_errors_reach_a_subscribed_listener(api: Api) -> None:
    emitter = await create(api, [THROWS], name="emitter")
    listener = await create(
        api, [step("keep", "async run({ steps }) { return steps.trigger.event; }")], name="archive"
    )
    params = {"emitter_id": emitter["id"], "listener_id": listener["id"], "event_name": "$errors"}
    created = await api.client.post("/v1/subscriptions", params=params)
    assert created.status_code == 200, created.text
    again = await api.client.post("/v1/subscriptions", params=params)
    assert again.json()["data"]["id"] == created.json()["data"]["id"]
    subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
    assert [s for s in subs if s["listener_id"] == listener["id"]] == [created.json()["data"]]
    # An $errors subscription is not one of the listener's triggers.
    read = (await api.client.get(f"/v1/workflows/{listener['id']}")).json()["data"]
    assert read["trigger"] == {"type": "manual"}

    failed = await run(api, emitter["id"], {"order": 7})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert len(runs) == 1
    heard = runs[0]["steps"][0]["return_value"]
    assert set(heard) == {"error", "original_event", "original_context"}
    assert heard["original_event"] == {"order": 7}
    assert heard["error"]["cellId"] == emitter["steps"][0]["id"]
    assert heard["original_context"]["id"] == failed["id"]
    assert runs[0]["context"]["source_type"] == "ERRORS"

    deleted = await api.client.delete("/v1/subscriptions", params=params)
    assert deleted.status_code == 200
    await run(api, emitter["id"], {"order": 8})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert len(runs) == 1


async def test_globs_and_auto_subscriptions(api: Api) -> None:
    listener = await create(api, [step("keep", "async run() { return 1; }")], name="all")
    made = await api.client.post(
        "/v1/subscriptions",
        params={"emitter_id": "p_*", "listener_id": listener["id"], "event_name": "$errors"},
    )
    assert made.status_code == 200, made.text
    failing = await create(api, [THROWS])
    await run(api, failing["id"], {})
    await api.platform.jobs.drain()
    assert len((await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]) == 1
    await api.client.delete(
        "/v1/subscriptions",
        params={"emitter_id": "p_*", "listener_id": listener["id"], "event_name": "$errors"},
    )

    auto = await api.client.post(
        "/v1/auto_subscriptions", params={"event_name": "$errors", "listener_id": listener["id"]}
    )
    assert auto.status_code == 200, auto.text
    later = await create(api, [THROWS], name="later")
    subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
    assert {"emitter_id": later["id"], "listener_id": listener["id"], "event_name": "$errors"} in [
        {k: s[k] for k in ("emitter_id", "listener_id", "event_name")} for s in subs
    ]
    await run(api, later["id"], {})
    await api.platform.jobs.drain()
    assert len((await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]) == 2
    # New sources too, as Pipedream's "every new workflow or event source": a source created
    # afterwards had no subscription, and its errors reached no one.
    code = 'export default { name: "Later", version: "1", async run() { null.boom; } };'
    source = (await api.client.post("/v1/sources", json={"component_code": code})).json()["data"]
    subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
    assert {"emitter_id": source["id"], "listener_id": listener["id"], "event_name": "$errors"} in [
        {k: s[k] for k in ("emitter_id", "listener_id", "event_name")} for s in subs
    ]
    await api.client.post(f"/v1/sources/{source['id']}/run", json={})
    await api.platform.jobs.drain()
    assert len((await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]) == 3


async def test_subscription_errors(api: Api, other_api: Api) -> None:
    mine = await create(api, [DOUBLE])
    theirs = await create(other_api, [DOUBLE])
    cases = [
        ({"emitter_id": mine["id"], "listener_id": "p_nothere", "event_name": "$errors"}, 404),
        ({"emitter_id": theirs["id"], "listener_id": mine["id"], "event_name": "$errors"}, 404),
        ({"emitter_id": mine["id"], "listener_id": theirs["id"], "event_name": "$errors"}, 404),
        ({"emitter_id": mine["id"], "listener_id": mine["id"], "event_name": "$errors"}, 400),
        ({"emitter_id": mine["id"], "listener_id": "sc_abc", "event_name": "$errors"}, 400),
        ({"emitter_id": mine["id"], "listener_id": "hello", "event_name": "$errors"}, 400),
    ]
    for params, status in cases:
        response = await api.client.post("/v1/subscriptions", params=params)
        assert response.status_code == status, (params, response.text)
        assert response.json()["field"] in ("emitter_id", "listener_id")


async def test_forwarding_never_loops(api: Api) -> None:
    # Two workflows that fail on everything, each listening to the other's errors, and the
    # global error workflow replaced by one that fails too.
    a = await create(api, [THROWS], name="a")
    b = await create(api, [THROWS], name="b")
    g = await create(api, [THROWS], name="global")
    for emitter, listener in ((a, b), (b, a)):
        response = await api.client.post(
            "/v1/subscriptions",
            params={
                "emitter_id": emitter["id"],
                "listener_id": listener["id"],
                "event_name": "$errors",
            },
        )
        assert response.status_code == 200
    response = await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": g["id"]})
    assert response.status_code == 200, response.text
    await run(api, a["id"], {})
    await api.platform.jobs.drain()  # returns: the chain ends

    def count(runs: dict[str, Any]) -> int:
        return int(runs["page_info"]["total_count"])

    runs = {
        w["name"]: count((await api.client.get(f"/v1/workflows/{w['id']}/runs")).json())
        for w in (a, b, g)
    }
    # a (manual) → b (a's error) → g gets a's and b's errors; b's error does not go back to
    # a (already on the chain); g's own errors are never fed back to g.
    assert runs == {"a": 1, "b": 1, "global": 2}
    g_runs = (await api.client.get(f"/v1/workflows/{g['id']}/runs")).json()["data"]
    assert sorted(r["context"]["hops"][-1] for r in g_runs) == sorted([a["id"], b["id"]])


RELAY = """
export default { name: "Relay", version: "1",
  async run(event) { this.$emit({ n: ((event && event.n) || 0) + 1 }); } };
"""


async def test_sources_subscribed_in_a_ring_stop(api: Api) -> None:
    """Two sources each listening to the other's emits, and a workflow whose $.send.emit
    feeds a source that feeds it back: each used to run until deleted (thousands of runs in
    seconds). Now a delivery never goes back to a listener the event went through."""
    a, b = [
        (await api.client.post("/v1/sources", json={"component_code": RELAY, "name": n})).json()[
            "data"
        ]
        for n in ("ring-a", "ring-b")
    ]
    for emitter, listener in ((a, b), (b, a)):
        params = {"emitter_id": emitter["id"], "listener_id": listener["id"]}
        assert (await api.client.post("/v1/subscriptions", params=params)).status_code == 200
    ran = await api.client.post(f"/v1/sources/{a['id']}/run", json={"event": {"n": 0}})
    assert ran.status_code == 200, ran.text
    await api.platform.jobs.drain()  # returns: the ring ends

    async def events(source: dict[str, Any]) -> list[Any]:
        url = f"/v1/sources/{source['id']}/event_summaries"
        page = (await api.client.get(url, params={"expand": "event"})).json()["data"]
        return [item["event"]["n"] for item in page]

    # a (by hand) emits 1 → b emits 2 → a emits 3, whose delivery to b (on its way) stops.
    assert (await events(a), await events(b)) == ([3, 1], [2])

    relay = (await api.client.post("/v1/sources", json={"component_code": RELAY})).json()["data"]
    wf = await create(
        api,
        [step("out", "async run({ steps, $ }) { $.send.emit({ n: 10 }); }")],
        name="ring-wf",
        trigger={"type": "source", "source_id": relay["id"]},
    )
    params = {"emitter_id": wf["id"], "listener_id": relay["id"]}
    assert (await api.client.post("/v1/subscriptions", params=params)).status_code == 200
    await run(api, wf["id"], {})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{wf['id']}/runs")).json()
    assert runs["page_info"]["total_count"] == 1  # the relay's emit does not run it again
    assert await events(relay) == [11]


async def test_the_global_error_workflow_mails_once_per_code(api: Api) -> None:
    me = (await api.client.get("/v1/users/me/error_workflow")).json()["data"]["workflow_id"]
    assert me and me.startswith("p_")
    default = (await api.client.get(f"/v1/workflows/{me}")).json()["data"]
    assert default["is_error_workflow"] is True and default["name"] == "Global error workflow"

    failing = await create(api, [THROWS], name="nightly-report")
    await run(api, failing["id"], {"a": 1})
    await run(api, failing["id"], {"a": 2})  # same code: no second e-mail
    other = await create(api, [step("bad", 'async run() { throw new RangeError("too far"); }')])
    await run(api, other["id"], {})
    await api.platform.jobs.drain()

    runs = await error_workflow_runs(api)
    assert len(runs) == 3  # the workflow receives every error
    statuses = sorted(r["sends"][0]["status"] for r in runs)
    assert statuses == ["skipped", "written", "written"]  # no SMTP: the outbox
    written = [r["sends"][0]["outcome"] for r in runs if r["sends"][0]["status"] == "written"]
    messages = [email.message_from_bytes(Path(o["path"]).read_bytes()) for o in written]
    subjects = sorted(m["Subject"] for m in messages)
    assert subjects == sorted(
        ["[Sluice] TypeError in nightly-report", f"[Sluice] RangeError in {other['name']}"]
    )
    body = next(m for m in messages if "nightly" in m["Subject"]).get_payload(decode=True)
    text = body.decode()
    assert (
        "Workflow: nightly-report" in text and f"Step: boom ({failing['steps'][0]['id']})" in text
    )
    assert "What: TypeError: Cannot read properties of undefined" in text
    assert "Error: TypeError" not in text  # the name once, not "Error: Error: …"
    # Links to the UI's pages (the run, the workflow's errors), not to the API's JSON.
    failed = (await api.client.get(f"/v1/workflows/{failing['id']}/runs")).json()["data"]
    lines = text.splitlines()
    assert any(line.endswith(f"/runs/{r['id']}") for r in failed for line in lines)
    assert any(line.endswith(f"/workflows/{failing['id']}") for line in lines)
    assert "/v1/" not in text
    assert all(m["To"].startswith("u-user-") for m in messages)


async def test_a_replaced_error_workflow_gets_every_error(api: Api) -> None:
    chat = await create(
        api, [step("post", "async run({ steps }) { return steps.trigger.event.error.code; }")]
    )
    assert (
        await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": chat["id"]})
    ).status_code == 200
    failing = await create(api, [THROWS])
    for _ in range(2):
        await run(api, failing["id"], {})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{chat['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in runs] == ["TypeError", "TypeError"]
    none = await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": None})
    assert none.status_code == 200
    missing = await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": "p_nope"})
    assert_error(missing, 404, "not_found")


async def test_definition_errors_name_the_field(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"trigger": {"type": "manual"}}, "steps"),
        ({"steps": [DOUBLE]}, "trigger"),
        ({"trigger": {"type": "email"}, "steps": [DOUBLE]}, "trigger.type"),
        ({"trigger": {"type": "http", "x": 1}, "steps": [DOUBLE]}, "trigger.x"),
        ({"trigger": {"type": "timer"}, "steps": [DOUBLE]}, "trigger"),
        (
            {"trigger": {"type": "timer", "intervalSeconds": 1}, "steps": [DOUBLE]},
            "trigger.intervalSeconds",
        ),
        ({"trigger": {"type": "manual"}, "steps": []}, "steps"),
        ({"trigger": {"type": "manual"}, "steps": [DOUBLE, DOUBLE]}, "steps[1].name"),
        (
            {"trigger": {"type": "manual"}, "steps": [{"name": "trigger", "code": "x"}]},
            "steps[0].name",
        ),
        ({"trigger": {"type": "manual"}, "steps": [{"name": "a"}]}, "steps[0]"),
        (
            {"trigger": {"type": "manual"}, "steps": [{"name": "a", "code": "export default {"}]},
            "steps[0].code",
        ),
        (
            {"trigger": {"type": "manual"}, "steps": [{"name": "a", "code": "export default {}"}]},
            "steps[0].code",
        ),
        (
            {"trigger": {"type": "manual"}, "steps": [{"name": "a", "action": "nope-action"}]},
            "steps[0].action",
        ),
        (
            {"trigger": {"type": "source", "source_id": "dc_nothere"}, "steps": [DOUBLE]},
            "trigger.source_id",
        ),
    ]
    for body, field in cases:
        response = await api.client.post("/v1/workflows", json=body)
        assert 400 <= response.status_code < 500, (body, response.text)
        assert response.json().get("field") == field, (body, response.text)


async def test_updates_keep_step_ids_and_make_a_new_deployment(api: Api) -> None:
    workflow = await create(api, [DOUBLE, CATCHES])
    ids = {s["name"]: s["id"] for s in workflow["steps"]}
    renamed = await api.client.put(f"/v1/workflows/{workflow['id']}", json={"name": "renamed"})
    assert renamed.json()["data"]["deployment_id"] == workflow["deployment_id"]
    response = await api.client.put(
        f"/v1/workflows/{workflow['id']}", json={"steps": [CATCHES, DOUBLE, EXITS]}
    )
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["deployment_id"] != workflow["deployment_id"]
    assert (
        updated["steps"][0]["id"] == ids["careful"] and updated["steps"][1]["id"] == ids["double"]
    )
    assert updated["steps"][2]["id"] not in ids.values()
    result = await run(api, workflow["id"], {"n": 2})
    assert [s["name"] for s in result["steps"]] == ["careful", "double", "stop"]
    assert result["deployment_id"] == updated["deployment_id"]

    off = await api.client.put(f"/v1/workflows/{workflow['id']}", json={"active": False})
    assert off.json()["data"]["active"] is False
    refused = await api.client.post(f"/v1/workflows/{workflow['id']}/runs", json={"event": {}})
    assert_error(refused, 409, "conflict")
    assert (await api.client.delete(f"/v1/workflows/{workflow['id']}")).status_code == 200
    assert_error(await api.client.get(f"/v1/workflows/{workflow['id']}"), 404, "not_found")
    assert_error(await api.client.get(f"/v1/runs/{result['id']}"), 404, "not_found")


async def test_other_accounts_see_nothing(api: Api, other_api: Api) -> None:
    workflow = await create(api, [THROWS])
    result = await run(api, workflow["id"], {})
    wid = workflow["id"]
    for method, path in [
        ("GET", f"/v1/workflows/{wid}"),
        ("PUT", f"/v1/workflows/{wid}"),
        ("DELETE", f"/v1/workflows/{wid}"),
        ("POST", f"/v1/workflows/{wid}/runs"),
        ("GET", f"/v1/workflows/{wid}/runs"),
        ("GET", f"/v1/workflows/{wid}/$errors/event_summaries"),
        ("GET", f"/v1/workflows/{wid}/event_summaries"),
        ("GET", f"/v1/runs/{result['id']}"),
        ("POST", f"/v1/runs/{result['id']}/replay"),
    ]:
        kwargs: dict[str, Any] = {"json": {}} if method in ("PUT", "POST") else {}
        response = await other_api.client.request(method, path, **kwargs)
        assert response.status_code == 404, (method, path, response.text)
    listed = (await other_api.client.get("/v1/users/me/workflows")).json()["data"]
    assert wid not in [w["id"] for w in listed]


async def test_list_my_workflows(api: Api) -> None:
    made = [(await create(api, [DOUBLE], name=f"w{i}"))["id"] for i in range(3)]
    page = (await api.client.get("/v1/users/me/workflows", params={"limit": 2})).json()
    # The global error workflow counts too.
    assert page["page_info"]["total_count"] == 4 and page["page_info"]["count"] == 2
    rest = (
        await api.client.get(
            "/v1/users/me/workflows", params={"after": page["page_info"]["end_cursor"]}
        )
    ).json()
    seen = [w["id"] for w in page["data"] + rest["data"]]
    assert set(made) <= set(seen) and len(seen) == 4


async def test_the_global_error_workflow_mails_over_smtp(api: Api) -> None:
    import dataclasses

    from sluice.engine.outbound.mailer import Mailer
    from tests.integration.test_mailer import smtp_server

    sends = api.platform.sends
    before = sends.mailer
    async with smtp_server() as inbox:
        settings = dataclasses.replace(
            api.platform.settings, smtp_url=f"smtp://127.0.0.1:{inbox.port}"
        )
        sends.mailer = Mailer(settings)
        try:
            failing = await create(api, [THROWS], name="smtp-check")
            await run(api, failing["id"], {"x": 1})
            await api.platform.jobs.drain()
        finally:
            sends.mailer = before
    # Other tests' queued e-mails may go out in this drain too: this account's is the one.
    [message] = [m for m in inbox.messages if m["Subject"].endswith("in smtp-check")]
    assert message["Subject"] == "[Sluice] TypeError in smtp-check"
    me = (await api.client.get("/v1/users/me")).json()["data"]
    assert message["To"] == me["email"] and me["email"].endswith("@example.com")
    text = message.get_content()
    assert f"Workflow: smtp-check ({failing['id']})" in text
    assert "What: TypeError: Cannot read properties of undefined" in text
    runs = await error_workflow_runs(api)
    assert runs[0]["sends"][0]["status"] == "sent"
    assert runs[0]["sends"][0]["outcome"]["transport"] == "smtp"


async def test_code_steps_keep_state_in_their_db(api: Api) -> None:
    counter = step(
        "count",
        'props: { db: "$.service.db" }, async run() { const n = (this.db.get("n") || 0) + 1; '
        'this.db.set("n", n); if (n === 2) this.db.set("seen", [n]); return n; }',
    )
    workflow = await create(api, [counter, DOUBLE])
    values = [(await run(api, workflow["id"], {"n": 1}))["steps"][0]["return_value"] for _ in "abc"]
    assert values == [1, 2, 3]
    # The store belongs to the step: an update that keeps the step keeps it.
    updated = await api.client.put(f"/v1/workflows/{workflow['id']}", json={"steps": [counter]})
    assert updated.status_code == 200
    assert (await run(api, workflow["id"], {}))["steps"][0]["return_value"] == 4


async def test_a_sources_errors_reach_its_errors_subscribers(api: Api) -> None:
    from tests.integration.test_sources_api import deploy

    code = """
    export default {
      name: "Flaky", version: "0.0.1",
      async run(event) { if (event.fail) throw new RangeError("bad input"); this.$emit({ ok: 1 }); },
    };
    """
    source = await deploy(api, code, name="flaky")
    listener = await create(
        api, [step("keep", "async run({ steps }) { return steps.trigger.event; }")]
    )
    params = {"emitter_id": source["id"], "listener_id": listener["id"], "event_name": "$errors"}
    assert (await api.client.post("/v1/subscriptions", params=params)).status_code == 200
    ran = await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"fail": True}})
    assert ran.json()["data"]["ok"] is False and ran.json()["data"]["emitted"] == []
    await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {}})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    [heard] = [r["steps"][0]["return_value"] for r in runs]
    assert heard["error"]["code"] == "RangeError" and heard["error"]["msg"] == "bad input"
    assert heard["error"]["cellId"] == source["id"]
    assert heard["original_event"] == {"fail": True}
    assert heard["original_context"]["deployment_id"] == source["id"]
    # The source's event list shows its emits; its errors only when asked for.
    summaries = f"/v1/sources/{source['id']}/event_summaries"
    plain = (await api.client.get(summaries, params={"expand": "event"})).json()["data"]
    assert [e["event"] for e in plain] == [{"ok": 1}]
    errs = (await api.client.get(summaries, params={"event_name": "$errors"})).json()["data"]
    assert len(errs) == 1 and errs[0]["metadata"]["name"] == "$errors"


async def test_a_syntax_error_names_its_line(api: Api) -> None:
    code = "export default defineComponent({\n  async run( { } })\n"
    response = await api.client.post(
        "/v1/workflows",
        json={"trigger": {"type": "manual"}, "steps": [{"name": "a", "code": code}]},
    )
    body = assert_error(response, 400, "component_load_failed")
    assert body["field"] == "steps[0].code"
    assert body["error"].endswith("SyntaxError: Unexpected token '}' (step.mjs:2)")


async def test_the_account_email_can_change(api: Api) -> None:
    changed = await api.client.put("/v1/users/me", json={"email": "ops@example.com"})
    assert changed.status_code == 200 and changed.json()["data"]["email"] == "ops@example.com"
    failing = await create(api, [THROWS], name="to-ops")
    await run(api, failing["id"], {})
    await api.platform.jobs.drain()
    # A new address gets nothing until it is verified (issue 25): the send says why.
    refused = (await error_workflow_runs(api))[0]["sends"][0]
    assert refused["status"] == "failed" and "not verified" in refused["outcome"]["error"]
    asked = await api.client.post("/v1/users/me/email/verification")
    assert asked.status_code == 202, asked.text
    outbox = sorted(api.platform.settings.outbox_dir.glob("*.eml"), key=lambda f: f.stat().st_mtime)
    mails = [email.message_from_bytes(f.read_bytes(), policy=email.policy.default) for f in outbox]
    link = next(
        word
        for m in reversed(mails)
        if m["To"] == "ops@example.com"
        for word in m.get_content().split()
        if "/v1/email/verify?token=" in word
    )
    followed = await api.client.get("/v1/email/verify?" + link.split("?", 1)[1])
    assert followed.json()["data"]["email_verified"] is True
    await run(api, failing["id"], {})
    await api.platform.jobs.drain()
    runs = await error_workflow_runs(api)
    outcome = runs[0]["sends"][0]["outcome"]
    message = email.message_from_bytes(Path(outcome["path"]).read_bytes())
    assert message["To"] == "ops@example.com"
    bad = await api.client.put("/v1/users/me", json={"email": "not an address"})
    assert assert_error(bad, 400, "invalid_request")["field"] == "email"


async def test_a_workflow_can_keep_its_errors_from_the_global_workflow(api: Api) -> None:
    chat = await create(api, [step("post", "async run() { return 1; }")], name="chat")
    await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": chat["id"]})
    quiet = await create(api, [THROWS], name="quiet", global_errors=False)
    assert quiet["global_errors"] is False
    await run(api, quiet["id"], {})
    await api.platform.jobs.drain()
    assert (await api.client.get(f"/v1/workflows/{chat['id']}/runs")).json()["data"] == []
    assert (await errors_of(api, quiet["id"]))["page_info"]["count"] == 1  # still listed
    await api.client.put(f"/v1/workflows/{quiet['id']}", json={"global_errors": True})
    await run(api, quiet["id"], {})
    await api.platform.jobs.drain()
    assert len((await api.client.get(f"/v1/workflows/{chat['id']}/runs")).json()["data"]) == 1
