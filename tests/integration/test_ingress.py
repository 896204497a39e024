"""Generated HTTP endpoints of sources (``/e/{endpoint_id}``), on both dialects: the event a
request becomes, the default and custom answers, limits, 404s, CORS, and durability (a 2xx is
given only once the request is stored as a job)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import sqlalchemy as sa

from sluice.api.app import serving
from sluice.domain import http_events
from sluice.domain.states import JobKind
from sluice.storage.tables import deployed_components as sources_table
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

EMITTER = """
export default {
  name: "Http Emitter",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event);
    // Ignored: without customResponse the endpoint has answered already.
    await this.http.respond({ status: 418, body: "ignored" });
  },
};
"""

RESPONDER = """
export default {
  name: "Responder",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    const q = event.query;
    this.$emit({ mode: q.mode || "object" });
    if (q.mode === "never") return;
    if (q.mode === "throw") throw new TypeError("boom");
    if (q.mode === "slow") { await new Promise((r) => setTimeout(r, 3000)); return; }
    if (q.mode === "buffer") {
      return this.http.respond({ status: 200, body: Buffer.from([0, 1, 2, 255]) });
    }
    if (q.mode === "text") {
      return this.http.respond({ status: 202, headers: { "Content-Type": "text/csv" }, body: "a,b" });
    }
    if (q.mode === "bad-headers") {
      return this.http.respond({ status: 200, headers: { "bad name": "x" } });
    }
    await this.http.respond({
      status: q.status ?? "201",
      headers: { "X-Answer": "yes", "Set-Cookie": ["a=1", "b=2"], "X-Count": 3 },
      body: { got: event.body, path: event.path },
    });
    this.http.respond({ status: 500, body: "a second respond() is ignored" });
  },
};
"""


@pytest_asyncio.fixture(loop_scope="session")
async def public(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client without an API key: endpoints are public."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(api.platform)),
        base_url="http://sluice.test",
        timeout=60,
    ) as client:
        yield client


@pytest.fixture
def limits(api: Api) -> Iterator[Any]:
    """Lets a test change the ingress limits; restored afterwards."""
    ingress = api.platform.ingress
    saved = ingress.limits
    yield lambda **changes: setattr(ingress, "limits", dataclasses.replace(saved, **changes))
    ingress.limits = saved


FORM = "application/x-www-form-urlencoded"


async def deploy(api: Api, code: str, **body: Any) -> tuple[str, str]:
    """(source id, endpoint path)."""
    response = await api.client.post("/v1/sources", json={"component_code": code, **body})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    # No public URL set: the request's (the test client's base URL; test_public_url.py).
    assert data["endpoint_url"].startswith("http://sluice.test/e/")
    return data["id"], "/e/" + data["endpoint_url"].rsplit("/", 1)[1]


async def emitted(api: Api, source_id: str) -> list[Any]:
    """The source's events, oldest first."""
    page = await api.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"}
    )
    assert page.status_code == 200, page.text
    return [item["event"] for item in reversed(page.json()["data"])]


async def test_event_shapes_by_content_type(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, EMITTER)
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", f"{path}/hooks/a", {"json": {"a": [1, 2]}, "headers": {"X-Custom": "Yes"}}),
        ("POST", path, {"data": {"name": "Luke", "n": "1"}}),
        ("POST", path, {"content": b"plain text", "headers": {"content-type": "text/plain"}}),
        ("POST", path, {"content": b'{"name": "Luke"}', "headers": {"content-type": FORM}}),
        ("POST", path, {"content": b"{not json", "headers": {"content-type": "application/json"}}),
        ("GET", f"{path}/", {"params": [("q", "1"), ("q", "2"), ("empty", "")]}),
        ("DELETE", path, {}),
        (
            "POST",
            path,
            {
                "files": {"file": ("a.bin", b"\x00\x01", "application/octet-stream")},
                "data": {"field": "v"},
            },
        ),
    ]
    for seq, (method, url, options) in enumerate(requests):
        # A header to find each event by: a batch of jobs runs concurrently, in any order.
        headers = {**options.pop("headers", {}), "X-Seq": str(seq)}
        response = await public.request(method, url, headers=headers, **options)
        assert response.status_code == 200, response.text
        assert response.json() == {"success": True}
        assert response.headers["access-control-allow-origin"] == "*"
    assert await emitted(api, source_id) == []  # stored as jobs, not yet run
    await api.platform.jobs.drain()
    by_seq = {int(e["headers"]["x-seq"]): e for e in await emitted(api, source_id)}
    events = [by_seq[i] for i in range(len(requests))]
    json_event = events[0]
    assert set(json_event) == {"method", "path", "query", "headers", "bodyRaw", "body"}
    assert json_event["method"] == "POST" and json_event["path"] == "/hooks/a"
    assert json_event["query"] == {}
    assert json_event["body"] == {"a": [1, 2]} == json.loads(json_event["bodyRaw"])
    assert json_event["headers"]["x-custom"] == "Yes"
    assert all(name == name.lower() for name in json_event["headers"])
    assert "authorization" not in json_event["headers"]
    assert events[1]["body"] == {"name": "Luke", "n": "1"}
    assert events[1]["bodyRaw"] == "name=Luke&n=1"
    assert events[2]["body"] == "plain text" == events[2]["bodyRaw"]
    assert events[3]["body"] == '{"name": "Luke"}'  # no "=": the text, as on Pipedream
    assert events[4]["body"] == "{not json"
    get = events[5]
    assert get["method"] == "GET" and get["path"] == "/"
    assert get["query"] == {"q": "2", "empty": ""}  # the last value wins
    assert get["bodyRaw"] == "" and "body" not in get  # no body: no "body"
    assert events[6]["method"] == "DELETE" and "body" not in events[6]
    form = events[7]["body"]
    assert form["field"] == "v"
    # A file part is stored behind a URL (as on Pipedream), with its bytes as they came.
    url = form["file"].pop("url")
    assert form["file"] == {"filename": "a.bin", "mimetype": "application/octet-stream", "size": 2}
    assert (await public.get(url.removeprefix("http://sluice.test"))).content == b"\x00\x01"
    assert events[7]["bodyRaw"] == ""  # the bytes are behind the URL


async def test_acknowledged_means_stored(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, EMITTER)
    response = await public.put(path, json={"order": 7})
    assert response.status_code == 200
    # No worker ran it: the request is a queued job, and nothing else holds it.
    async with api.platform.db.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(jobs_table.c.kind, jobs_table.c.status, jobs_table.c.payload).where(
                    jobs_table.c.target_id == source_id
                )
            )
        ).all()
    assert [(r.kind, r.status) for r in rows] == [("http", "queued")]
    # The request as it came; the event is built when the job runs.
    event = http_events.event_of(rows[0].payload)
    assert event["body"] == {"order": 7} and event["method"] == "PUT"
    assert await emitted(api, source_id) == []
    await api.platform.jobs.drain()
    assert [e["body"] for e in await emitted(api, source_id)] == [{"order": 7}]
    async with api.platform.db.connect() as conn:
        status = (
            await conn.execute(
                sa.select(jobs_table.c.status).where(jobs_table.c.target_id == source_id)
            )
        ).scalar_one()
    assert status == "done"


async def test_custom_response_reaches_the_client(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, RESPONDER)
    response = await public.post(f"{path}/x", json={"hello": "world"})
    assert response.status_code == 201, response.text  # the string "201", coerced
    assert response.headers["x-answer"] == "yes" and response.headers["x-count"] == "3"
    # On the web UI's origin (the default), no cookie leaves an endpoint (endpoint_origins).
    assert "set-cookie" not in response.headers
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"got": {"hello": "world"}, "path": "/x"}
    # respond() answered before the run ended; once it has, its emit is stored.
    await api.platform.ingress.idle()
    assert await emitted(api, source_id) == [{"mode": "object"}]

    buffer = await public.get(path, params={"mode": "buffer"})
    assert buffer.status_code == 200
    assert buffer.content == bytes([0, 1, 2, 255])
    assert buffer.headers["content-type"] == "application/octet-stream"
    text = await public.get(path, params={"mode": "text"})
    assert (text.status_code, text.text, text.headers["content-type"]) == (202, "a,b", "text/csv")


@pytest.mark.parametrize("status", ["99", "600", "abc", "100"])
async def test_an_invalid_status_is_a_clear_500(
    api: Api, public: httpx.AsyncClient, status: str
) -> None:
    _, path = await deploy(api, RESPONDER)
    body = assert_error(
        await public.get(path, params={"status": status}), 500, "invalid_response_status"
    )
    assert "status" in body["error"] and ("100 to 599" in body["error"] or "1xx" in body["error"])


async def test_bad_headers_are_a_clear_500(api: Api, public: httpx.AsyncClient) -> None:
    _, path = await deploy(api, RESPONDER)
    body = assert_error(
        await public.get(path, params={"mode": "bad-headers"}), 500, "invalid_response"
    )
    assert "header name" in body["error"]


async def test_no_respond_answers_when_run_ends(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, RESPONDER)
    body = assert_error(await public.get(path, params={"mode": "never"}), 504, "no_response")
    assert "ended without calling respond()" in body["error"]
    body = assert_error(await public.get(path, params={"mode": "throw"}), 504, "no_response")
    assert "threw TypeError" in body["error"] and "boom" not in body["error"]
    # Both runs still happened and were kept.
    assert await emitted(api, source_id) == [{"mode": "never"}, {"mode": "throw"}]


async def test_a_run_that_fails_in_sluice_answers_503_and_runs_again(
    api: Api, public: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the source's error (that is a stored run): Sluice's own, e.g. its store away. The
    # request is stored and its job queued again with backoff, so the waiting client hears
    # "retrying", not that the source "ended without calling respond()" (which it never ran).
    source_id, path = await deploy(api, RESPONDER)
    worker = api.platform.jobs

    async def broken(job: Any, finish: Any) -> None:
        raise RuntimeError("the store is away")

    monkeypatch.setitem(worker.handlers, JobKind.HTTP, broken)
    body = assert_error(await public.get(path, params={"mode": "never"}), 503, "retrying")
    assert "runs again" in body["error"]
    async with api.platform.db.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(
                    jobs_table.c.status, jobs_table.c.attempts, jobs_table.c.last_error
                ).where(jobs_table.c.target_id == source_id)
            )
        ).all()
    assert [(status, attempts) for status, attempts, _ in rows] == [("queued", 1)]
    assert "the store is away" in rows[0][2]


async def test_no_respond_in_time_answers_504(
    api: Api, public: httpx.AsyncClient, limits: Any
) -> None:
    _, path = await deploy(api, RESPONDER)
    limits(response_timeout_seconds=0.2)
    body = assert_error(await public.get(path, params={"mode": "slow"}), 504, "no_response")
    assert "within 0.2 s" in body["error"]


async def test_body_limit_413(api: Api, public: httpx.AsyncClient, limits: Any) -> None:
    source_id, path = await deploy(api, EMITTER)
    limits(max_body_bytes=64)
    assert (await public.post(path, content=b"x" * 64)).status_code == 200
    assert_error(await public.post(path, content=b"x" * 65), 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for _ in range(10):
            yield b"y" * 10

    assert_error(await public.post(path, content=chunks()), 413, "payload_too_large")
    await api.platform.jobs.drain()
    assert len(await emitted(api, source_id)) == 1


async def test_rate_limit_429(api: Api, public: httpx.AsyncClient, limits: Any) -> None:
    _, path = await deploy(api, EMITTER)
    _, other = await deploy(api, EMITTER, name="other")
    limits(rate_per_second=0.01, burst=3)
    for _ in range(3):
        assert (await public.post(path, json={})).status_code == 200
    response = await public.post(path, json={})
    body = assert_error(response, 429, "rate_limited")
    assert int(response.headers["retry-after"]) >= 1
    assert body["details"]["retry_after_seconds"] == int(response.headers["retry-after"])
    assert (await public.post(other, json={})).status_code == 200  # per endpoint
    await api.platform.jobs.drain()


async def test_unknown_inactive_and_deleted_endpoints_404(
    api: Api, public: httpx.AsyncClient
) -> None:
    assert_error(await public.post("/e/nosuchendpoint0000", json={}), 404, "not_found")
    assert_error(await public.get("/e/NOT-AN-ID/x"), 404, "not_found")
    _, inactive = await deploy(api, EMITTER, active=False)
    assert_error(await public.post(inactive, json={}), 404, "not_found")
    assert_error(await public.options(inactive), 404, "not_found")
    source_id, path = await deploy(api, EMITTER, name="doomed")
    assert (await public.post(path, json={})).status_code == 200
    assert (await api.client.delete(f"/v1/sources/{source_id}")).status_code == 200
    assert_error(await public.post(path, json={}), 404, "not_found")
    # The request accepted before the delete finds no source: its job ends, nothing runs.
    await api.platform.jobs.drain()
    async with api.platform.db.connect() as conn:
        status = (
            await conn.execute(
                sa.select(jobs_table.c.status).where(jobs_table.c.target_id == source_id)
            )
        ).scalar_one()
    assert status == "done"


async def test_changes_in_this_process_reach_the_endpoint_at_once(
    api: Api, public: httpx.AsyncClient
) -> None:
    """The endpoint directory is cached; this process's own changes are never served stale."""
    source_id, path = await deploy(api, EMITTER, name="toggled")
    assert (await public.post(path, json={})).status_code == 200  # cached now
    update = await api.client.put(f"/v1/sources/{source_id}", json={"active": False})
    assert update.status_code == 200, update.text
    assert_error(await public.post(path, json={}), 404, "not_found")
    assert (await api.client.put(f"/v1/sources/{source_id}", json={"active": True})).is_success
    assert (await public.post(path, json={})).status_code == 200
    # New code that answers requests itself: the next request waits for its respond().
    update = await api.client.put(f"/v1/sources/{source_id}", json={"component_code": RESPONDER})
    assert update.status_code == 200, update.text
    response = await public.post(path, json={"n": 1})
    assert response.status_code == 201, response.text
    assert response.json()["got"] == {"n": 1}


async def test_changes_by_another_process_show_within_the_time_to_live(
    api: Api, public: httpx.AsyncClient
) -> None:
    directory = api.platform.ingress.directory
    now = [1000.0]
    saved = directory.monotonic
    directory.monotonic = lambda: now[0]
    try:
        source_id, path = await deploy(api, EMITTER, name="elsewhere")
        assert (await public.post(path, json={"n": 1})).status_code == 200
        async with api.platform.db.begin() as conn:  # as another Sluice process would
            await conn.execute(
                sources_table.update().where(sources_table.c.id == source_id).values(active=False)
            )
        # Within the time-to-live the entry stands: accepted, stored, and dropped at run time.
        assert (await public.post(path, json={"n": 2})).status_code == 200
        now[0] += directory.ttl_seconds + 0.01
        assert_error(await public.post(path, json={"n": 3}), 404, "not_found")
        await api.platform.jobs.drain()
        assert await emitted(api, source_id) == []
        async with api.platform.db.connect() as conn:
            statuses = (
                await conn.execute(
                    sa.select(jobs_table.c.status).where(jobs_table.c.target_id == source_id)
                )
            ).scalars()
            assert list(statuses) == ["done", "done"]
    finally:
        directory.monotonic = saved


async def test_a_client_gone_before_its_body_is_not_stored(api: Api) -> None:
    source_id, path = await deploy(api, EMITTER, name="gone")
    app = serving(api.platform)
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }
    await app(scope, receive, send)
    assert sent == []  # nobody to answer
    async with api.platform.db.connect() as conn:
        count = (
            await conn.execute(
                sa.select(sa.func.count()).where(jobs_table.c.target_id == source_id)
            )
        ).scalar_one()
    assert count == 0


async def test_options_answers_cors(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, EMITTER)
    response = await public.options(
        f"{path}/any",
        headers={
            "Origin": "https://example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-token",
        },
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-allow-methods"] == "GET,HEAD,PUT,PATCH,POST,DELETE"
    assert response.headers["access-control-allow-headers"] == "content-type,x-token"
    await api.platform.jobs.drain()
    assert await emitted(api, source_id) == []  # the source did not run


async def test_any_method_reaches_the_source(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, EMITTER)
    for method in ("PATCH", "HEAD", "PROPFIND"):
        response = await public.request(method, path)
        assert response.status_code == 200, (method, response.text)
    await api.platform.jobs.drain()
    methods = sorted(e["method"] for e in await emitted(api, source_id))
    assert methods == ["HEAD", "PATCH", "PROPFIND"]


CRASHER = """
export default {
  name: "Crasher",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run() { process.kill(process.pid, "SIGKILL"); },
};
"""


async def test_a_crashed_runner_runs_the_request_again(api: Api, public: httpx.AsyncClient) -> None:
    source_id, path = await deploy(api, CRASHER)
    body = assert_error(await public.post(path, json={}), 504, "no_response")
    assert "crashed" in body["error"]
    await api.platform.ingress.idle()
    async with api.platform.db.connect() as conn:
        row = (
            await conn.execute(
                sa.select(jobs_table.c.status, jobs_table.c.attempts).where(
                    jobs_table.c.target_id == source_id
                )
            )
        ).one()
    assert (row.status, row.attempts) == ("queued", 1)  # again, after a backoff
    # Deleted, it will not crash its runner again when the retry comes: the job just ends.
    assert (await api.client.delete(f"/v1/sources/{source_id}")).status_code == 200


async def test_no_cookie_reaches_an_endpoint_on_the_uis_origin(
    api: Api, public: httpx.AsyncClient
) -> None:
    """Endpoints answer on the web UI's origin by default, so a signed-in browser sends its
    session cookie, and the cookies other endpoints set, to every endpoint: the event (which
    another account's source would read) and the stored request hold none of them; the
    endpoint's answer is sandboxed."""
    source_id, path = await deploy(api, EMITTER)
    cookie = "sluice_session=SECRET-SESSION; theme=dark; __Host-sluice_x=SECRET2"
    response = await public.post(path, json={"a": 1}, headers={"Cookie": cookie})
    assert response.status_code == 200, response.text
    await api.platform.jobs.drain()
    [event] = await emitted(api, source_id)
    assert "cookie" not in event["headers"]
    async with api.platform.db.connect() as conn:
        payloads = (
            await conn.execute(
                sa.select(jobs_table.c.payload).where(jobs_table.c.target_id == source_id)
            )
        ).all()
    assert payloads and "SECRET" not in json.dumps([p.payload for p in payloads])

    only_ours = await public.post(path, json={"a": 2}, headers={"Cookie": "sluice_session=S"})
    assert only_ours.status_code == 200
    await api.platform.jobs.drain()
    assert "cookie" not in (await emitted(api, source_id))[-1]["headers"]

    _responder_id, answer_path = await deploy(api, RESPONDER)
    answered = await public.post(answer_path, json={})
    assert answered.headers["content-security-policy"] == http_events.SANDBOX
    assert answered.headers["x-content-type-options"] == "nosniff"
