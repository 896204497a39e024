"""Workflow triggers and side effects: HTTP endpoints ($.respond, immediate, the default answer,
failures), timers (fake clock), sources, action steps, $.send.*, time-outs, and delivery that
survives a killed runner and a restarted process."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa

from sluice.clock import FakeClock, SystemClock
from sluice.domain import egress
from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import JobWorker
from sluice.engine.queue.scheduler import Scheduler
from sluice.platform import Platform
from sluice.storage import jobs, timers
from sluice.storage.tables import jobs as jobs_table
from sluice.storage.tables import workflows as workflows_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_sources_api import deploy
from tests.integration.test_workflows import THROWS, create, run, step


class Gate:
    """A local HTTP server whose first ``hold`` requests wait until ``release()``; every
    request is recorded (method, path, body)."""

    def __init__(self, hold: int = 0) -> None:
        self.hold = hold
        self.requests: list[tuple[str, str, bytes]] = []
        self.headers: list[dict[str, str]] = []
        self.arrived = asyncio.Event()
        self._open = asyncio.Event()
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def release(self) -> None:
        self._open.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append((method, path, body))
        self.headers.append(
            {
                k.strip().lower(): v.strip()
                for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
            }
        )
        self.arrived.set()
        if len(self.requests) <= self.hold:
            await self._open.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> Gate:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        assert self.server is not None
        self.server.close()


async def hit(api: Api, workflow: dict[str, Any], **kwargs: Any) -> Any:
    url = workflow["endpoint_url"]
    path = url[url.index("/e/") :]
    return await api.client.post(path, **kwargs)


RESPONDS = step(
    "answer",
    "async run({ steps, $ }) { await $.respond({ status: 201, headers: { 'x-step': 'answer' }, "
    "body: { got: steps.trigger.event.body } }); return 'done'; }",
)


async def test_http_trigger_default_answer_runs_later(api: Api) -> None:
    workflow = await create(
        api,
        [step("keep", "async run({ steps }) { return steps.trigger.event.body; }")],
        trigger={"type": "http"},
    )
    assert workflow["endpoint_url"].startswith("http") and "/e/" in workflow["endpoint_url"]
    assert workflow["trigger"]["endpoint_url"] == workflow["endpoint_url"]
    response = await hit(api, workflow, json={"order": 1})
    assert response.status_code == 200, response.text
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert len(runs) == 1
    assert runs[0]["steps"][0]["return_value"] == {"order": 1}
    assert runs[0]["event"]["method"] == "POST" and runs[0]["context"]["source_type"] == "HTTP"
    # Pipedream's workflow HTTP event also has the URL called and the client's address.
    assert runs[0]["event"]["url"] == workflow["endpoint_url"] + "/"
    assert runs[0]["event"]["client_ip"] == "127.0.0.1"
    url = workflow["endpoint_url"]
    await api.client.post(url[url.index("/e/") :] + "/a/b?x=1", json={})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert runs[0]["event"]["url"] == workflow["endpoint_url"] + "/a/b?x=1"


async def test_http_trigger_respond(api: Api) -> None:
    workflow = await create(api, [RESPONDS], trigger={"type": "http"})
    response = await hit(api, workflow, json={"a": 1})
    assert response.status_code == 201, response.text
    assert response.headers["x-step"] == "answer" and response.json() == {"got": {"a": 1}}
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert runs[0]["response"]["status"] == 201 and runs[0]["status"] == "success"


async def test_immediate_respond_answers_before_the_run_ends(
    api: Api, loopback_egress: Any
) -> None:
    async with Gate(hold=1) as gate:
        workflow = await create(
            api,
            [
                step(
                    "early",
                    "async run({ $ }) { await $.respond({ status: 202, body: 'accepted', "
                    "immediate: true }); }",
                ),
                step("slow", f"async run() {{ return (await fetch('{gate.url}/slow')).status; }}"),
            ],
            trigger={"type": "http"},
        )
        response = await hit(api, workflow, content=b"x")
        # Answered while the second step is still blocked on the gate.
        assert response.status_code == 202 and response.text == "accepted"
        await gate.arrived.wait()
        runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
        assert runs == []
        gate.release()
        await api.platform.ingress.idle()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert [s["return_value"] for s in runs[0]["steps"]] == [None, 200]


async def test_a_mention_of_respond_in_a_comment_or_string_answers_by_default(api: Api) -> None:
    """Whether clients wait for $.respond is read from the steps' code when the trigger does
    not say: a comment or a string naming it made every request a 400."""
    quiet = await create(
        api,
        [
            step(
                "quiet",
                "async run() { // TODO $.respond() once ready\n  return 'use $.respond( later'; }",
            )
        ],
        trigger={"type": "http"},
    )
    response = await hit(api, quiet, json={})
    assert response.status_code == 200, response.text


async def test_an_invalid_respond_status_fails_the_step_and_reaches_errors(api: Api) -> None:
    """The client got a 500 while the run was stored as a success: the error reached neither
    $errors nor the global error workflow."""
    bad = await create(
        api,
        [step("answer", "async run({ $ }) { await $.respond({ status: 600, body: 'x' }); }")],
        trigger={"type": "http"},
    )
    response = await hit(api, bad, json={})
    body = assert_error(response, 500, "workflow_failed")
    assert "status must be an integer from 200 to 599, not 600" in body["error"], body
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{bad['id']}/runs")).json()["data"]
    assert runs[0]["status"] == "error" and runs[0]["steps"][0]["error"]["name"] == "RangeError"
    errors_page = await api.client.get(f"/v1/workflows/{bad['id']}/$errors/event_summaries")
    assert len(errors_page.json()["data"]) == 1


async def test_http_trigger_without_respond_or_failing(api: Api) -> None:
    never = await create(
        api,
        [step("quiet", "async run() { return 1; }")],
        trigger={"type": "http", "custom_response": True},
    )
    response = await hit(api, never, json={})
    body = assert_error(response, 400, "no_response")
    assert body["error"] == "No $.respond called in workflow"

    failing = await create(
        api,
        [THROWS, RESPONDS],
        trigger={"type": "http"},  # custom response detected: a step calls $.respond(
    )
    response = await hit(api, failing, json={})
    body = assert_error(response, 500, "workflow_failed")
    assert "boom" in body["error"] and "TypeError" in body["error"]


async def test_http_endpoint_limits(api: Api) -> None:
    workflow = await create(api, [RESPONDS], trigger={"type": "http"})
    limit = api.platform.settings.http_max_body_bytes
    assert_error(await hit(api, workflow, content=b"x" * (limit + 1)), 413, "payload_too_large")
    await api.client.put(f"/v1/workflows/{workflow['id']}", json={"active": False})
    assert_error(await hit(api, workflow, json={}), 404, "not_found")
    await api.client.put(f"/v1/workflows/{workflow['id']}", json={"active": True})
    assert (await hit(api, workflow, json={})).status_code == 201
    await api.client.delete(f"/v1/workflows/{workflow['id']}")
    assert_error(await hit(api, workflow, json={}), 404, "not_found")


@pytest.mark.usefixtures("empty_queue")  # every due timer is this test's
async def test_timer_trigger_runs_each_tick(api: Api, platform: Platform) -> None:
    clock = FakeClock(SystemClock().now_ms())
    handlers = {JobKind.TIMER: platform.jobs.handlers[JobKind.TIMER]}
    worker = JobWorker(platform.db, clock, handlers=handlers)
    workflow = await create(
        api,
        [step("tick", "async run({ steps }) { return steps.trigger.event; }")],
        trigger={"type": "timer", "intervalSeconds": 30},
    )
    scheduler = Scheduler(platform.db, clock, notify=worker.notify)
    async with platform.db.connect() as conn:
        timer = await timers.get(conn, workflow["id"])
    assert timer is not None and timer.schedule.interval_seconds == 30
    clock.set(timer.next_run_ms - 1)
    assert await scheduler.tick() == 0
    clock.set(timer.next_run_ms)
    assert await scheduler.tick() == 1
    assert await worker.drain() == 1
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert runs[0]["context"]["source_type"] == "TIMER"
    assert runs[0]["steps"][0]["return_value"]["interval_seconds"] == 30
    # Inactive: no timer any more.
    await api.client.put(f"/v1/workflows/{workflow['id']}", json={"active": False})
    clock.advance(seconds=60)
    assert await scheduler.tick() == 0


EMITTER = """
export default {
  name: "Orders", version: "0.0.1",
  async run(event) { this.$emit({ order: event.n }); this.$emit({ vip: true }, { name: "vip" }); },
};
"""


async def test_source_trigger(api: Api) -> None:
    source = await deploy(api, EMITTER, name="orders")
    workflow = await create(
        api,
        [step("keep", "async run({ steps }) { return steps.trigger.event; }")],
        trigger={"type": "source", "source_id": source["id"]},
    )
    vip = await create(
        api,
        [step("keep", "async run({ steps }) { return steps.trigger.event; }")],
        trigger={"type": "source", "source_id": source["id"], "event_name": "vip"},
    )
    ran = await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 5}})
    assert ran.status_code == 200
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in runs] == [{"order": 5}]
    assert runs[0]["context"]["source_type"] == "COMPONENT"
    assert runs[0]["context"]["emitter_id"] == source["id"]
    vip_runs = (await api.client.get(f"/v1/workflows/{vip['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in vip_runs] == [{"vip": True}]


async def _emit_payloads(api: Api, target_id: str) -> list[dict[str, Any]]:
    """The payloads of the ``emit`` jobs for one listener (done jobs are kept an hour)."""
    async with api.platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.payload).where(
                jobs_table.c.kind == JobKind.EMIT, jobs_table.c.target_id == target_id
            )
        )
        return [dict(row.payload) for row in rows]


async def test_emit_jobs_carry_their_listeners_kind(api: Api) -> None:
    """A source's emit to a workflow is an ``emit`` job whose payload names the listener's
    kind (``domain/jobs.EmitJob``); one queued before it did (no ``listener``: an earlier
    version's) runs all the same, its kind read from the target's id."""
    source = await deploy(api, EMITTER, name="orders")
    workflow = await create(
        api,
        [step("keep", "async run({ steps }) { return steps.trigger.event; }")],
        trigger={"type": "source", "source_id": source["id"]},
    )
    ran = await api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 7}})
    assert ran.status_code == 200
    await api.platform.jobs.drain()
    stored = await _emit_payloads(api, workflow["id"])
    assert [payload["listener"] for payload in stored] == ["workflow"]
    assert [payload["from"] for payload in stored] == ["source"]  # who emitted it
    # Jobs queued by an earlier version: no listener's kind, no emitter's; read from the ids.
    # A workflow's $.send.emit labels its listener's run EMIT, a source's COMPONENT.
    for n, emitter_id in ((8, source["id"]), (9, "p_earlierworkflow")):
        earlier = {"event_id": f"e_{n}", "emitter_id": emitter_id, "channel": "", "event": {"n": n}}
        async with api.platform.db.begin() as conn:
            await jobs.enqueue(
                conn,
                kind=JobKind.EMIT,
                owner_id=api.account_id,
                target_id=workflow["id"],
                payload=earlier,
                now_ms=api.platform.clock.now_ms(),
            )
        await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in runs] == [{"n": 9}, {"n": 8}, {"order": 7}]
    labels = [(r["context"]["source_type"], r["context"]["emitter_id"]) for r in runs]
    assert labels == [
        ("EMIT", "p_earlierworkflow"),
        ("COMPONENT", source["id"]),
        ("COMPONENT", source["id"]),
    ]


ACTION = """
export default {
  name: "Greet", key: "greet", version: "0.0.1", type: "action",
  props: {
    times: { type: "integer", min: 1 },
    token: { type: "string", secret: true },
    who: { type: "string", optional: true, default: "world" },
  },
  async run({ $, steps }) {
    $.export("$summary", `greeted ${this.times}`);
    return { text: `hello ${this.who} `.repeat(this.times).trim(), token: this.token.length };
  },
};
"""


async def test_action_steps(api: Api, platform: Platform) -> None:
    saved = await api.client.post("/v1/components", json={"component_code": ACTION})
    assert saved.status_code == 200, saved.text
    workflow = await create(
        api,
        [
            step("count", "async run({ steps }) { return steps.trigger.event.n; }"),
            {
                "name": "greet",
                "action": "greet",
                "props": {"times": "{{steps.count.$return_value}}", "token": "s3cr3t-value"},
            },
        ],
    )
    assert workflow["steps"][1]["component_id"] == saved.json()["data"]["id"]
    assert workflow["steps"][1]["secret_props"] == ["token"]
    assert "s3cr3t-value" not in json.dumps(workflow)
    result = await run(api, workflow["id"], {"n": 2})
    greet = result["steps"][1]
    assert greet["return_value"] == {"text": "hello world hello world", "token": 12}
    assert greet["exports"] == {"$summary": "greeted 2"}
    async with platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(workflows_table.c.steps).where(workflows_table.c.id == workflow["id"])
            )
        ).scalar_one()
    assert "s3cr3t-value" not in json.dumps(row)

    # A value referring to a step reaches run() as the expression gives it, like a value
    # given directly (docs/api.md, "Configured values"): below `min` too.
    result = await run(api, workflow["id"], {"n": 0})
    assert result["status"] == "success", result
    assert result["steps"][1]["return_value"] == {"text": "", "token": 12}
    # Given directly, a value passes with its type (docs/api.md, "Configured values"); a
    # prop the action does not have is refused.
    bad = await api.client.post(
        "/v1/workflows",
        json={
            "trigger": {"type": "manual"},
            "steps": [{"name": "g", "action": "greet", "props": {"nope": 0, "token": "x"}}],
        },
    )
    body = assert_error(bad, 400, "invalid_props")
    assert body["field"] == "steps[0].props.nope"

    # An update that leaves the secret out keeps it (the step and its action are the same).
    steps = [
        step("count", "async run({ steps }) { return steps.trigger.event.n; }"),
        {"name": "greet", "action": "greet", "props": {"times": "{{steps.count.$return_value}}"}},
    ]
    updated = await api.client.put(f"/v1/workflows/{workflow['id']}", json={"steps": steps})
    assert updated.status_code == 200, updated.text
    result = await run(api, workflow["id"], {"n": 1})
    assert result["steps"][1]["return_value"] == {"text": "hello world", "token": 12}


TYPES = """
export default {
  name: "Types", key: "types", version: "0.0.1", type: "action",
  props: {
    text: { type: "string" },
    count: { type: "integer", max: 3 },
    flag: { type: "boolean", optional: true },
  },
  async run() {
    return { text: this.text, textType: typeof this.text, count: this.count, flag: this.flag };
  },
};
"""


async def test_expressions_reach_run_with_their_type(api: Api) -> None:
    saved = await api.client.post("/v1/components", json={"component_code": TYPES})
    assert saved.status_code == 200, saved.text
    make = step("make", "async run({ steps }) { return steps.trigger.event; }")
    props = {
        "text": "{{steps.make.$return_value.obj}}",
        "count": "{{steps.make.$return_value.big}}",
        "flag": "{{steps.make.$return_value.flag}}",
    }
    workflow = await create(api, [make, {"name": "t", "action": "types", "props": props}])
    result = await run(api, workflow["id"], {"obj": {"a": [1, "b"]}, "big": 99, "flag": "maybe"})
    assert result["status"] == "success", result
    # An object for a string prop is the object; a number past max and text for a boolean
    # pass as they are, as on Pipedream.
    assert result["steps"][1]["return_value"] == {
        "text": {"a": [1, "b"]},
        "textType": "object",
        "count": 99,
        "flag": "maybe",
    }
    # A required prop whose expression gives nothing is missing: the one refusal left.
    result = await run(api, workflow["id"], {"big": 1})
    assert result["status"] == "error"
    assert result["error"]["code"] == "ConfigurationError"
    assert 'prop "text" is required' in result["error"]["msg"]
    # Optional: an expression giving nothing passes (undefined: left out of the JSON).
    result = await run(api, workflow["id"], {"obj": "plain", "big": "2"})
    assert result["steps"][1]["return_value"] == {"text": "plain", "textType": "string", "count": 2}


@pytest.fixture
def loopback_egress(platform: Platform) -> Any:
    """User code may reach the test's loopback Gate through the sandbox's egress proxy (a new
    account's runner starts its proxy with the policy in force then)."""
    sandbox = platform.pool.sandbox
    if sandbox is None:
        yield
        return
    before = sandbox.egress_policy
    sandbox.egress_policy = egress.EgressPolicy.parse("127.0.0.1:*")
    yield
    sandbox.egress_policy = before


@pytest.fixture
def loopback_sends(platform: Platform) -> Any:
    """$.send.http may reach the test's loopback Gate (the egress policy refuses loopback)."""
    before = platform.sends.egress
    platform.sends.egress = egress.EgressPolicy.parse("127.0.0.1:*")
    yield
    platform.sends.egress = before


async def test_sends(api: Api, loopback_sends: Any) -> None:
    async with Gate() as gate:
        listener = await create(
            api, [step("keep", "async run({ steps }) { return steps.trigger.event; }")]
        )
        workflow = await create(
            api,
            [
                step(
                    "out",
                    "async run({ steps, $ }) {"
                    f" $.send.http({{ method: 'POST', url: '{gate.url}/hook', data: {{ a: 1 }} }});"
                    " $.send.emit({ order: 9 });"
                    " $.send.emit({ raw_event: { legacy: true }, channel: 'alerts' });"
                    " $.send.sse({ channel: 'updates', payload: { n: 1 } });"
                    " $.send.s3({ bucket: 'my-bucket', prefix: 'p/', payload: { n: 1 } });"
                    " }",
                )
            ],
        )
        sub = await api.client.post(
            "/v1/subscriptions",
            params={"emitter_id": workflow["id"], "listener_id": listener["id"]},
        )
        assert sub.status_code == 200, sub.text
        result = await run(api, workflow["id"], {})
        assert [s["type"] for s in result["sends"]] == ["http", "emit", "emit", "sse", "s3"]
        await api.platform.jobs.drain()
        assert gate.requests == [("POST", "/hook", b'{"a":1}')]
    stored = (await api.client.get(f"/v1/runs/{result['id']}")).json()["data"]
    http, _emit, _alert, sse, s3 = stored["sends"]
    assert http["status"] == "sent" and http["outcome"]["http_status"] == 200
    assert sse["status"] == "done"
    assert s3["status"] == "failed" and "SLUICE_S3_ENDPOINT_URL" in s3["outcome"]["error"]
    emits = (
        await api.client.get(
            f"/v1/workflows/{workflow['id']}/event_summaries", params={"expand": "event"}
        )
    ).json()
    assert [e["event"] for e in emits["data"]] == [{"raw_event": {"order": 9}}]
    assert emits["data"][0]["metadata"]["name"] == ""
    alerts = (
        await api.client.get(
            f"/v1/workflows/{workflow['id']}/event_summaries",
            params={"expand": "event", "event_name": "alerts"},
        )
    ).json()
    assert [e["event"] for e in alerts["data"]] == [{"raw_event": {"legacy": True}}]
    # Without expand the same events (under 1 KB: whole).
    plain = await api.client.get(f"/v1/workflows/{workflow['id']}/event_summaries")
    assert [e["event"] for e in plain.json()["data"]] == [{"raw_event": {"order": 9}}]
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in runs] == [{"order": 9}]
    assert runs[0]["context"]["source_type"] == "EMIT"
    said = await _emit_payloads(api, listener["id"])
    assert [payload["from"] for payload in said] == ["workflow"]  # the label's source


async def test_a_send_emit_to_a_channel_too_long_to_store_fails_its_step(api: Api) -> None:
    # PostgreSQL refused the event's channel (300 characters at most) at the run's commit:
    # the run was never stored and its job ran again until it failed.
    workflow = await create(
        api,
        [
            step("first", "async run() { return 1; }"),
            step("out", "async run({ $ }) { $.send.emit({ a: 1 }, 'c'.repeat(301)); }"),
        ],
    )
    result = await run(api, workflow["id"], {"n": 1})
    assert result["status"] == "error", result
    assert "301 characters" in result["error"]["msg"] and "at most 300" in result["error"]["msg"]
    assert [s["status"] for s in result["steps"]][:1] == ["success"]
    stored = await api.client.get(f"/v1/runs/{result['id']}")
    assert stored.status_code == 200 and stored.json()["data"]["status"] == "error"
    emits = await api.client.get(f"/v1/workflows/{workflow['id']}/event_summaries")
    assert emits.json()["data"] == []
    # Astral characters count once each, as the column counts them: 300 of them fit.
    fits = await create(
        api, [step("out", "async run({ $ }) { $.send.emit({ b: 2 }, '\\u{1F600}'.repeat(300)); }")]
    )
    assert (await run(api, fits["id"], {}))["status"] == "success"


@pytest.fixture
def short_steps(platform: Platform) -> Any:
    before = platform.executor.settings
    platform.executor.settings = dataclasses.replace(before, workflow_step_timeout_seconds=0.5)
    yield
    platform.executor.settings = before


async def test_a_step_time_out_is_a_timeout_error(api: Api, short_steps: Any) -> None:
    workflow = await create(
        api,
        [step("first", "async run() { return 1; }"), step("spin", "async run() { for (;;) {} }")],
    )
    result = await run(api, workflow["id"], {})
    assert result["status"] == "error"
    assert result["error"]["code"] == "TIMEOUT"
    assert result["error"]["cellId"] == workflow["steps"][1]["id"]
    assert [s["status"] for s in result["steps"]] == ["success", "error"]
    again = await run(api, workflow["id"], {})  # a new worker serves the next run
    assert again["error"]["code"] == "TIMEOUT"


@pytest_asyncio.fixture(loop_scope="session")
async def fake_worker(platform: Platform) -> AsyncIterator[tuple[FakeClock, JobWorker]]:
    clock = FakeClock(SystemClock().now_ms())
    worker = JobWorker(
        platform.db, clock, handlers={JobKind.EMIT: platform.jobs.handlers[JobKind.EMIT]}
    )
    yield clock, worker


async def test_a_killed_runner_delivers_the_error_again(
    api: Api,
    platform: Platform,
    fake_worker: tuple[FakeClock, JobWorker],
    loopback_egress: Any,
) -> None:
    clock, worker = fake_worker
    async with Gate(hold=1) as gate:
        listener = await create(
            api,
            [step("archive", f"async run() {{ return (await fetch('{gate.url}/a')).status; }}")],
        )
        emitter = await create(api, [THROWS])
        await api.client.post(
            "/v1/subscriptions",
            params={
                "emitter_id": emitter["id"],
                "listener_id": listener["id"],
                "event_name": "$errors",
            },
        )
        await api.client.put("/v1/users/me/error_workflow", json={"workflow_id": None})
        await run(api, emitter["id"], {"n": 1})
        clock.set(SystemClock().now_ms())  # the delivery job is due

        draining = asyncio.create_task(worker.drain())
        await gate.arrived.wait()  # the listener's step is running
        runner = platform.pool.runner(api.account_id)
        assert runner is not None
        runner.kill()
        await draining  # the job failed with the runner; it is queued again, with backoff
        runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
        assert runs == []
        clock.advance(seconds=5)
        assert await worker.drain() == 1
        assert len(gate.requests) == 2
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert len(runs) == 1 and runs[0]["steps"][0]["return_value"] == 200
    clock.advance(seconds=600)
    assert await worker.drain() == 0  # a completed run is never run again


async def test_deliveries_survive_a_restart(api: Api, platform: Platform) -> None:
    listener = await create(api, [step("keep", "async run({ steps }) { return 1; }")])
    emitter = await create(api, [THROWS])
    await api.client.post(
        "/v1/subscriptions",
        params={
            "emitter_id": emitter["id"],
            "listener_id": listener["id"],
            "event_name": "$errors",
        },
    )
    await run(api, emitter["id"], {})
    # The delivery is a stored job: another process on the same database runs it.
    async with Platform.open(platform.settings, background=False) as second:
        assert await second.jobs.drain() >= 1
    runs = (await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]
    assert len(runs) == 1
    assert (
        await platform.jobs.drain() == 0
        or len((await api.client.get(f"/v1/workflows/{listener['id']}/runs")).json()["data"]) == 1
    )


async def test_the_mail_throttle_window(platform: Platform) -> None:
    from sluice.storage import runs as run_store

    owner = "u_throttle"
    day = 86_400_000

    def claim(at: int) -> Any:
        return lambda conn: run_store.claim_mail_slot_sync(
            conn, owner, "email:p_x:TypeError", now_ms=at, window_ms=day
        )

    writer = platform.commit.writer
    assert await writer(claim(1_000)) is True
    assert await writer(claim(1_000 + day - 1)) is False
    assert await writer(claim(1_000 + day)) is True  # a day later: again
    assert await writer(claim(1_000 + day + 5)) is False


async def test_a_step_out_of_memory_is_an_error_of_that_step(api: Api, platform: Platform) -> None:
    before = platform.executor.settings
    platform.executor.settings = dataclasses.replace(before, memory_mb=32)
    try:
        workflow = await create(
            api,
            [
                step("ok", "async run() { return 1; }"),
                step(
                    "hog",
                    "async run() { const a = []; for (;;) a.push(new Array(1e5).fill({ x: 1 })); }",
                ),
            ],
        )
        result = await run(api, workflow["id"], {})
    finally:
        platform.executor.settings = before
    assert result["status"] == "error"
    assert result["error"]["code"] == "OUT_OF_MEMORY"
    assert result["error"]["cellId"] == workflow["steps"][1]["id"]
    assert [s["status"] for s in result["steps"]] == ["success", "error"]


async def test_send_http_passwords_are_not_echoed(api: Api) -> None:
    workflow = await create(
        api,
        [
            step(
                "out",
                "async run({ $ }) { $.send.http({ method: 'GET', url: 'http://127.0.0.1:9/x', "
                "auth: { username: 'u', password: 'hunter2-secret' } }); }",
            )
        ],
    )
    result = await run(api, workflow["id"], {})
    assert result["sends"][0]["config"]["auth"] == {"username": "u", "password": "********"}
    await api.platform.jobs.drain()
    stored = (await api.client.get(f"/v1/runs/{result['id']}")).json()["data"]
    assert "hunter2-secret" not in json.dumps(stored)
    assert stored["sends"][0]["status"] == "failed"  # nothing listens on port 9
    from sluice.storage.tables import run_sends

    async with api.platform.db.connect() as conn:
        raw = (
            await conn.execute(
                sa.select(run_sends.c.config).where(run_sends.c.run_id == result["id"])
            )
        ).scalar_one()
    assert "hunter2-secret" not in json.dumps(raw)  # encrypted at rest


async def test_send_http_with_a_password_is_sent_with_it(api: Api, loopback_sends: Any) -> None:
    async with Gate() as gate:
        workflow = await create(
            api,
            [
                step(
                    "out",
                    "async run({ $ }) { $.send.http({ method: 'GET', "
                    f"url: '{gate.url}/auth', auth: {{ username: 'u', password: 'p4ss' }} }}); }}",
                )
            ],
        )
        await run(api, workflow["id"], {})
        await api.platform.jobs.drain()
    assert [r[:2] for r in gate.requests] == [("GET", "/auth")]
    assert gate.headers[0]["authorization"] == "Basic " + base64.b64encode(b"u:p4ss").decode()


async def test_workflow_endpoints_are_rate_limited(api: Api, platform: Platform) -> None:
    before = platform.ingress.limits
    platform.ingress.limits = dataclasses.replace(before, rate_per_second=1.0, burst=2)
    try:
        workflow = await create(
            api, [step("keep", "async run() { return 1; }")], trigger={"type": "http"}
        )
        answers = [(await hit(api, workflow, json={})).status_code for _ in range(3)]
    finally:
        platform.ingress.limits = before
    assert answers == [200, 200, 429]


async def test_changing_a_source_trigger_moves_its_subscription(api: Api) -> None:
    first = await deploy(api, EMITTER, name="first-orders")
    second = await deploy(api, EMITTER, name="second-orders")
    workflow = await create(
        api,
        [step("keep", "async run({ steps }) { return steps.trigger.event; }")],
        trigger={"type": "source", "source_id": first["id"]},
    )
    moved = await api.client.put(
        f"/v1/workflows/{workflow['id']}",
        json={"trigger": {"type": "source", "source_id": second["id"]}},
    )
    assert moved.status_code == 200, moved.text
    subs = (await api.client.get("/v1/users/me/subscriptions")).json()["data"]
    mine = [(s["emitter_id"], s["event_name"]) for s in subs if s["listener_id"] == workflow["id"]]
    assert mine == [(second["id"], "")]
    await api.client.post(f"/v1/sources/{first['id']}/run", json={"event": {"n": 1}})
    await api.client.post(f"/v1/sources/{second['id']}/run", json={"event": {"n": 2}})
    await api.platform.jobs.drain()
    runs = (await api.client.get(f"/v1/workflows/{workflow['id']}/runs")).json()["data"]
    assert [r["steps"][0]["return_value"] for r in runs] == [{"order": 2}]


async def test_the_builders_source_goes_with_its_workflows_trigger(api: Api) -> None:
    """A source the UI builder deployed for a workflow's trigger (marked so): deleted when the
    workflow leaves it over the API too, unless another workflow listens to it; one with
    events is stopped and kept; a source the builder did not make is never touched."""
    keep = [step("keep", "async run({ steps }) { return steps.trigger.event; }")]
    made, shared, busy, picked = [
        await deploy(api, EMITTER, name=n) for n in ("made", "shared", "busy", "picked")
    ]
    workflow = await create(api, keep, trigger={"type": "source", "source_id": made["id"]})
    for source in (made, shared, busy):
        await api.platform.mark_builder_source(api.account_id, source["id"], workflow["id"])
    other = await create(api, keep, trigger={"type": "source", "source_id": shared["id"]})
    sources_url = "/v1/users/me/sources"

    async def names() -> dict[str, bool]:
        found = (await api.client.get(sources_url)).json()["data"]
        return {s["name"]: s["active"] for s in found}

    for to in (shared, busy, picked):  # made, then shared, then busy are left
        if to is busy:
            await api.client.post(f"/v1/sources/{busy['id']}/run", json={"event": {"n": 1}})
            await api.platform.jobs.drain()
        answer = await api.client.put(
            f"/v1/workflows/{workflow['id']}",
            json={"trigger": {"type": "source", "source_id": to["id"]}},
        )
        assert answer.status_code == 200, answer.text
    # made: deleted; shared: another workflow listens; busy: it has an event, stopped.
    assert await names() == {"shared": True, "busy": False, "picked": True}
    assert (await api.client.delete(f"/v1/workflows/{workflow['id']}")).status_code == 200
    assert (await api.client.delete(f"/v1/workflows/{other['id']}")).status_code == 200
    assert await names() == {"shared": True, "busy": False, "picked": True}


async def test_pipedreams_notrigger_and_upload_body_switches(api: Api) -> None:
    keep = step("keep", "async run({ steps }) { return steps.trigger.event.body; }")
    workflow = await create(api, [keep], trigger={"type": "http"})
    runs_url = f"/v1/workflows/{workflow['id']}/runs"
    for kwargs in (
        {"headers": {"x-pd-notrigger": "1"}},
        {"params": {"x-pd-notrigger": "1"}},
    ):
        answered = await hit(api, workflow, json={"test": True}, **kwargs)
        assert answered.status_code == 200, answered.text
    await api.platform.jobs.drain()
    assert (await api.client.get(runs_url)).json()["data"] == []  # received, not run
    assert (await hit(api, workflow, json={"n": 1}, headers={"x-pd-notrigger": "0"})).is_success
    await api.platform.jobs.drain()
    assert len((await api.client.get(runs_url)).json()["data"]) == 1

    # A body over the limit is stored behind a URL the event holds (Pipedream's
    # steps.trigger.event.body.raw_body_url); without the switch it is 413, naming it.
    limit = api.platform.settings.http_max_body_bytes
    plain = assert_error(
        await hit(api, workflow, content=b"x" * (limit + 1)), 413, "payload_too_large"
    )
    assert "x-pd-upload-body: 1" in plain["error"]
    for n, kwargs in enumerate(
        ({"headers": {"x-pd-upload-body": "1"}}, {"params": {"pipedream_upload_body": "1"}})
    ):
        content = bytes([65 + n]) * (limit + 1)
        assert (await hit(api, workflow, content=content, **kwargs)).status_code == 200
        await api.platform.jobs.drain()
        latest = (await api.client.get(runs_url)).json()["data"][0]
        kept = latest["steps"][0]["return_value"]
        assert set(kept) == {"raw_body_url"}
        stored = await api.client.get(kept["raw_body_url"].removeprefix("http://sluice.test"))
        assert stored.status_code == 200 and stored.content == content
