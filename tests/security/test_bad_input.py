"""Hostile input from an ordinary account (issue 10, part 4, and the /v1 body limit of part 3),
on both dialects: a 2xx means the input was stored (read back through the API, it is what was
sent), and nothing is ever a 5xx. Text that no store takes as it is (NUL on PostgreSQL, lone
surrogates anywhere) is either kept faithfully or refused with a 400 before any 2xx."""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.api.app import serving
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

#: Emits what it gets; logs and keeps (db) a string with a NUL and a lone surrogate, and emits
#: one on a channel of its own: all JavaScript strings that storage cannot take as they are.
SOURCE = r"""
export default {
  name: "Bad Input Source",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db", x: { type: "any", optional: true } },
  async run(event) {
    if (event && event.nasty) {
      const s = "a\u0000b\ud800c";
      console.log(s);
      this.db.set("k", s);
      this.$emit({ s, before: this.db.get("seen") ?? null }, { summary: s });
      this.$emit(s, { name: "chan\ud800" });
      this.db.set("seen", s);
      return;
    }
    this.$emit(event);
  },
};
"""

STEP = "export default defineComponent({ async run() { return 1 } })"
FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest_asyncio.fixture(loop_scope="session")
async def public(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client without an API key: endpoints are public."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(api.platform)),
        base_url="http://sluice.test",
        timeout=60,
    ) as client:
        yield client


async def deploy(api: Api, **body: Any) -> tuple[str, str]:
    """(source id, endpoint path) of a new SOURCE."""
    response = await api.client.post("/v1/sources", json={"component_code": SOURCE, **body})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data["id"], "/e/" + data["endpoint_url"].rsplit("/", 1)[1]


async def events(api: Api, source_id: str, **params: str) -> list[dict[str, Any]]:
    """The source's events, newest first, with their payloads."""
    page = await api.client.get(
        f"/v1/sources/{source_id}/event_summaries", params={"expand": "event", **params}
    )
    assert page.status_code == 200, page.text
    items: list[dict[str, Any]] = page.json()["data"]
    return items


async def unfinished_jobs(api: Api, source_id: str) -> list[Any]:
    async with api.platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.status, jobs_table.c.last_error).where(
                jobs_table.c.target_id == source_id, jobs_table.c.status != "done"
            )
        )
        return list(rows.all())


def post_json(client: httpx.AsyncClient, url: str, text: str) -> Any:
    return client.post(url, content=text.encode(), headers={"content-type": "application/json"})


# ---- the cases the attacker found -------------------------------------------------------------


async def test_a_webhook_body_with_a_lone_surrogate_or_nul_is_stored_and_runs(
    api: Api, public: httpx.AsyncClient
) -> None:
    source_id, path = await deploy(api)
    bodies = [b'"\\ud800"', b'{"\\udfff": ["x\\u0000y", "\\ud83d\\ude00"]}']
    for raw in bodies:
        response = await public.post(
            path, content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200, response.text
    await api.platform.jobs.drain()
    assert await unfinished_jobs(api, source_id) == []  # every acknowledged request ran
    # A batch of jobs runs concurrently, in any order: found by bodyRaw, the text as it came.
    by_raw = {item["event"]["bodyRaw"]: item["event"] for item in await events(api, source_id)}
    assert set(by_raw) == {raw.decode() for raw in bodies}
    got = [by_raw[raw.decode()] for raw in bodies]
    # The parsed body: what no store takes is U+FFFD, as NUL was already; pairs stay.
    assert got[0]["body"] == "\ufffd"
    assert got[1]["body"] == {"\ufffd": ["x\ufffdy", "\U0001f600"]}


async def test_a_lone_surrogate_in_a_v1_body_is_a_400_naming_the_field(api: Api) -> None:
    source_id, _ = await deploy(api)
    cases = [
        (f"/v1/sources/{source_id}/run", '{"event": {"a": ["\\ud800"]}}', "event.a.0"),
        ("/v1/components", '{"component_code": "// \\udc00"}', "component_code"),
        ("/v1/sources", '{"component_code": "x", "name": "\\ud800"}', "name"),
        ("/v1/workflows", '{"name": "w", "steps": [{"name": "a\\udfff"}]}', "steps.0.name"),
    ]
    for url, text, field in cases:
        body = assert_error(await post_json(api.client, url, text), 400, "invalid_request")
        assert body["field"] == field and "lone surrogate" in body["error"], body


async def test_numbers_beyond_a_double_and_deep_nesting_are_400s(api: Api) -> None:
    source_id, _ = await deploy(api)
    url = f"/v1/sources/{source_id}/run"
    for text, field in [
        ('{"event": {"n": 1e400}}', "event.n"),
        ('{"event": [' + "1" * 400 + ".5]}", "event.0"),
        ('{"event": ' + "[" * 200 + "]" * 200 + "}", "event" + ".0" * 127),
    ]:
        body = assert_error(await post_json(api.client, url, text), 400, "invalid_request")
        assert body["field"] == field, body
    deep = '{"event": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert_error(await post_json(api.client, url, deep), 400, "invalid_request")


async def test_emits_logs_and_db_values_from_javascript_are_kept(api: Api) -> None:
    source_id, _ = await deploy(api)
    for _ in range(2):  # the second run reads the db value the first one kept
        run = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": {"nasty": 1}})
        assert run.status_code == 200, run.text
        assert run.json()["data"]["ok"] is True, run.text
    listed = await events(api, source_id)
    payloads = [item["event"] for item in listed]
    # Stored and served faithfully; handed back to JavaScript (the db value), a lone
    # surrogate is U+FFFD: the runner's pipe is UTF-8.
    assert payloads[1] == {"s": "a\x00b\ud800c", "before": "a\x00b\ufffdc"}
    assert payloads[3] == {"s": "a\x00b\ud800c", "before": None}
    assert payloads[0] == payloads[2] == "a\x00b\ud800c"
    assert listed[1]["metadata"]["summary"] == "a\x00b\ud800c"
    assert listed[0]["metadata"]["name"] == "chan\ufffd"  # a channel is a name: cleaned
    logs = (await api.client.get(f"/v1/sources/{source_id}/logs")).json()["data"]
    assert "a\ufffdb\ufffdc" in [line["msg"] for line in logs]  # a log line is for reading


LONG_NAMES = r"""
export default {
  name: "Long Names",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    this.$emit({ kept: 1 });
    this.$emit({ a: 1 }, { name: "c".repeat(400) });
    this.db.set("k".repeat(600), 1);
    this.db.set("short", 2);
  },
};
"""


async def test_a_run_naming_too_long_a_channel_or_db_key_keeps_the_rest(
    api: Api, public: httpx.AsyncClient
) -> None:
    # On PostgreSQL the columns' sizes are enforced: the whole run failed (a 500 on /v1, a job
    # failing until it gave up behind an acknowledged request).
    source_id, path = await deploy(api, component_code=LONG_NAMES)
    run = await api.client.post(f"/v1/sources/{source_id}/run", json={})
    assert run.status_code == 200, run.text
    assert (await public.post(path, json={"n": 1})).status_code == 200
    await api.platform.jobs.drain()
    assert await unfinished_jobs(api, source_id) == []
    assert [item["event"] for item in await events(api, source_id)] == [{"kept": 1}] * 2
    logs = (await api.client.get(f"/v1/sources/{source_id}/logs")).json()["data"]
    messages = [line["msg"] for line in logs]
    assert sum("$emit dropped: its channel name is 400" in m for m in messages) == 2
    assert sum("db.set dropped: its key is 600" in m for m in messages) == 2


async def test_over_long_names_and_paths_are_400s_naming_the_field(api: Api) -> None:
    long = "a" * 5000
    component = {"component_code": SOURCE}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/components", {**component, "files": {long: "x"}}, "files"),
        ("/v1/components", {**component, "files": {f"d/{'b' * 300}.mjs": "x"}}, "files.d/"),
        ("/v1/components", {**component, "component_path": long + ".mjs"}, "component_path"),
        ("/v1/sources", {**component, "name": long}, "name"),
        ("/v1/sources", {**component, "name": "tab\tname"}, "name"),
        (
            "/v1/workflows",
            {
                "name": "x\x00y",
                "trigger": {"type": "manual"},
                "steps": [{"name": "s", "code": STEP}],
            },
            "name",
        ),
        ("/v1/accounts", {"app": long, "credentials": {}}, "app"),
        (
            "/v1/components",
            {"component_code": SOURCE.replace('"Bad Input Source"', f'"{long}"')},
            "name",
        ),
    ]
    for url, body, field in cases:
        response = await api.client.post(url, json=body)
        assert response.status_code == 400, (url, field, response.text[:300])
        assert response.json()["field"].startswith(field), response.json()
    subscribe = await api.client.post(
        "/v1/subscriptions",
        params={"emitter_id": "dc_*", "listener_id": "dc_x", "event_name": long},
    )
    assert assert_error(subscribe, 400, "invalid_request")["field"] == "event_name"


async def test_a_nul_in_an_id_or_a_query_parameter_is_never_a_5xx(api: Api) -> None:
    # PostgreSQL refuses NUL in any text it is sent, lookups included.
    source_id, _ = await deploy(api)
    for method, url, status in [
        ("GET", "/v1/sources/%00", 404),
        ("GET", "/v1/components/%00", 404),
        ("GET", "/v1/components/registry/%00", 404),
        ("GET", "/v1/workflows/%00", 404),
        ("GET", "/v1/runs/%00", 404),
        ("GET", "/v1/accounts/%00", 404),
        ("GET", "/v1/accounts?app=%00", 200),
        ("GET", f"/v1/sources/{source_id}/event_summaries?event_name=%00", 200),
        ("DELETE", f"/v1/sources/{source_id}/events?event_name=%00", 202),
        ("POST", "/v1/components/%00/props/%00/options", 404),
        ("DELETE", "/v1/subscriptions?emitter_id=%00&listener_id=%00&event_name=%00", 404),
        ("POST", f"/v1/subscriptions?emitter_id=dc_*&listener_id={source_id}&event_name=a%00", 400),
    ]:
        response = await api.client.request(method, url)
        assert response.status_code == status, (method, url, response.text)


async def test_v1_bodies_are_limited_and_never_read_whole(api: Api) -> None:
    source_id, _ = await deploy(api)
    limit = api.platform.settings.api_max_body_bytes
    assert limit > api.platform.settings.max_component_bytes
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"event": "'
        for _ in range(100 * 2**20 // 65536):  # 100 MB, if it were all read
            sent += 65536
            yield b"x" * 65536

    response = await api.client.post(
        f"/v1/sources/{source_id}/run",
        content=endless(),
        headers={"content-type": "application/json"},
    )
    assert_error(response, 413, "payload_too_large")
    assert sent <= limit + 2 * 65536  # reading stopped at the limit
    declared = await api.client.post(
        f"/v1/sources/{source_id}/run",
        content=b"{}",
        headers={"content-type": "application/json", "content-length": str(limit + 1)},
    )
    assert_error(declared, 413, "payload_too_large")
    # Under the limit, a body the size of a large component passes.
    ok = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": "y" * (limit // 2)})
    assert ok.status_code == 200, ok.text[:200]


# ---- properties ---------------------------------------------------------------------------------


class Raw(str):
    """A JSON literal written as it is (numbers json.dumps cannot write)."""


def dumps(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # ASCII: lone surrogates and NUL go as \u escapes


def nest(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


chars = st.one_of(
    st.characters(),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d", "\ude00", "\u2028", "\x7f", "/"]),
)
texts = st.text(chars, max_size=12)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
    | st.sampled_from([Raw("1e400"), Raw("-1e999"), Raw("1" * 400 + ".5"), Raw("1E-400")])
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
) | st.integers(min_value=1, max_value=400).map(nest)

content_types = st.sampled_from(
    [
        "application/json",
        "application/vnd.x+json; charset=utf-8",
        "text/plain",
        "text/plain; charset=utf-7",
        "text/plain; charset=latin-1",
        "text/plain; charset=nope",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "application/octet-stream",
        "",
    ]
)
webhook_bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: dumps(v).encode()),
    st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def _codec(content_type: str) -> str:
    import codecs

    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip() == "charset":
            try:
                return codecs.lookup(value.strip()).name
            except LookupError:
                return "utf-8"
    return "utf-8"


def readable(text: str) -> str:
    """What a test expects of text after storage: NUL and lone surrogates as U+FFFD."""
    return "".join("\ufffd" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


@FUZZ
@given(raw=webhook_bodies, content_type=content_types)
async def test_any_webhook_body_is_stored_or_refused(
    api: Api, public: httpx.AsyncClient, raw: bytes, content_type: str
) -> None:
    source_id, path = await _fuzz_source(api)
    seq = str(len(_SEEN))
    _SEEN.append(seq)
    headers = {"x-seq": seq, **({"content-type": content_type} if content_type else {})}
    response = await public.post(path, content=raw, headers=headers)
    assert response.status_code < 500, response.text
    if response.status_code >= 300:
        return
    await api.platform.jobs.drain()
    assert await unfinished_jobs(api, source_id) == []
    newest = (await events(api, source_id))[0]["event"]
    assert newest["headers"]["x-seq"] == seq
    assert newest["bodyRaw"] == readable(raw.decode(_codec(content_type), "replace"))
    assert ("body" in newest) == bool(raw)


_SEEN: list[str] = []
_SOURCES: dict[str, tuple[str, str]] = {}


async def _fuzz_source(api: Api) -> tuple[str, str]:
    """One source per test (``api`` is one account per test, shared by its examples)."""
    if api.account_id not in _SOURCES:
        _SOURCES[api.account_id] = await deploy(api)
    return _SOURCES[api.account_id]


def same(sent: Any, got: Any) -> bool:
    """Equal as JSON through JavaScript: numbers are doubles there (a number beyond one is
    null, as JSON.stringify writes Infinity)."""
    if isinstance(sent, bool) or sent is None or isinstance(sent, str):
        return bool(sent == got)
    if isinstance(sent, (int, float)):
        if sent == got:
            return True
        try:
            as_double = float(sent)
        except OverflowError:
            return got is None
        return (
            isinstance(got, (int, float))
            and not isinstance(got, bool)
            and (as_double == float(got) or math.isclose(as_double, float(got), rel_tol=1e-15))
        )
    if isinstance(sent, list):
        return (
            isinstance(got, list)
            and len(sent) == len(got)
            and all(same(a, b) for a, b in zip(sent, got, strict=True))
        )
    if isinstance(sent, dict):
        return (
            isinstance(got, dict)
            and set(sent) == set(got)
            and all(same(v, got[k]) for k, v in sent.items())
        )
    return False


@FUZZ
@given(value=json_values, name=texts, file_name=texts, comment=texts)
async def test_any_v1_json_is_stored_or_refused(
    api: Api, value: Any, name: str, file_name: str, comment: str
) -> None:
    source_id, _ = await _fuzz_source(api)
    # A source run: the event comes back as the source emits it.
    run = await post_json(api.client, f"/v1/sources/{source_id}/run", dumps({"event": value}))
    assert run.status_code < 500, run.text
    if run.status_code < 300:
        assert run.json()["data"]["ok"] is True, run.text
        sent = json.loads(dumps(value))
        expected = {} if sent is None else sent  # no event: the default one, {}
        assert same(expected, (await events(api, source_id))[0]["event"])

    # A component save: the code comes back as it was, the file under its normalized path.
    line = "".join(" " if c in "\r\n\u2028\u2029" else c for c in comment)
    code = SOURCE + "// " + line + "\n"
    saved = await post_json(
        api.client,
        "/v1/components",
        dumps({"component_code": code, "files": {file_name: comment}}),
    )
    assert saved.status_code < 500, saved.text
    if saved.status_code < 300:
        got = (await api.client.get(f"/v1/components/{saved.json()['data']['id']}")).json()
        assert got["data"]["code"] == code
        assert posixpath.normpath(file_name) in got["data"]["files"]

    # A deploy: the name and a prop value come back.
    deployed = await post_json(
        api.client,
        "/v1/sources",
        dumps({"component_code": SOURCE, "name": name, "configured_props": {"x": value}}),
    )
    assert deployed.status_code < 500, deployed.text
    if deployed.status_code < 300:
        data = deployed.json()["data"]
        got = (await api.client.get(f"/v1/sources/{data['id']}")).json()["data"]
        assert got["name"] == (name or "Bad Input Source")
        # null: unset. PostgreSQL keeps numbers as decimals: 1.8e16 comes back an int.
        assert same(json.loads(dumps(value)), got["configured_props"].get("x"))
        await api.client.delete(f"/v1/sources/{data['id']}")

    # A workflow: its name, and a step's code with the comment.
    created = await post_json(
        api.client,
        "/v1/workflows",
        dumps(
            {
                "name": name or "w",
                "trigger": {"type": "manual"},
                "steps": [{"name": "s", "code": STEP + " // " + line}],
            }
        ),
    )
    assert created.status_code < 500, created.text
    if created.status_code < 300:
        workflow = created.json()["data"]
        got = (await api.client.get(f"/v1/workflows/{workflow['id']}")).json()["data"]
        assert got["name"] == (name or "w").strip()
        assert got["steps"][0]["code"] == STEP + " // " + line
        await api.client.delete(f"/v1/workflows/{workflow['id']}")


DEEP = r"""
export default {
  name: "Deep",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const nest = (n) => { let v = 1; for (let i = 0; i < n; i++) v = [v]; return v; };
    this.$emit(event.body && event.body.depth ? nest(event.body.depth) : JSON.parse(event.bodyRaw));
  },
};
"""


async def test_values_nested_too_deep_by_user_code_fail_the_run_at_once(
    api: Api, public: httpx.AsyncClient
) -> None:
    """User code can build values deeper than any input may be. 3,000 levels made Python's
    parser give up on the runner's line: the run hung, the account's runner was restarted and
    the request's job failed after five tries. 300 levels were stored, and every listing of the
    source's events answered 500 from then on. Now both fail the run with DEPTH_LIMIT."""
    source_id, path = await deploy(api, component_code=DEEP)
    for depth in (300, 3000):
        run = await api.client.post(
            f"/v1/sources/{source_id}/run", json={"event": {"body": {"depth": depth}}}
        )
        assert run.status_code == 200, run.text
        error = run.json()["data"]["error"]
        assert error["code"] == "DEPTH_LIMIT" and "128 levels" in error["message"], error
    raw = "[" * 3000 + "]" * 3000  # through the public endpoint: the source parses bodyRaw
    answer = await public.post(path, content=raw, headers={"Content-Type": "text/plain"})
    assert answer.status_code == 200
    await api.platform.jobs.drain()
    assert await unfinished_jobs(api, source_id) == []  # done, not retried
    assert await events(api, source_id) == []
    logs = (await api.client.get(f"/v1/sources/{source_id}/logs")).json()["data"]
    assert sum("DEPTH_LIMIT" in line["msg"] for line in logs) == 3


async def test_a_data_store_value_nested_too_deep_is_refused_in_user_code(api: Api) -> None:
    assert (await api.client.post("/v1/data_stores", json={"name": "deep"})).status_code in (
        200,
        409,
    )
    action = (
        'export default { name: "Deep store", version: "0.0.1", type: "action",\n'
        '  props: { store: { type: "data_store" }, depth: { type: "integer" } },\n'
        "  async run() {\n"
        "    let v = 1; for (let i = 0; i < this.depth; i++) v = [v];\n"
        '    try { await this.store.set("k", v); return "stored"; }\n'
        "    catch (e) { return String(e.message); }\n"
        "  } };\n"
    )
    for depth in (300, 5000):
        ran = await api.client.post(
            "/v1/actions/run",
            json={
                "component_code": action,
                "configured_props": {"store": "deep", "depth": depth},
            },
        )
        assert ran.status_code == 200, ran.text
        assert "deeper than 128 levels" in str(ran.json()["data"]["ret"]), ran.text
    records = await api.client.get("/v1/data_stores/deep/records")
    assert records.status_code == 200 and records.json()["data"] == []


async def test_huge_intervals_and_ttls_are_400s_never_500s_or_hangs(api: Api) -> None:
    """A timer interval or a TTL past a 64-bit count of milliseconds was a 500 (OverflowError
    on save), and in user code a TTL of 1e17 never answered (the run timed out)."""
    huge = 9223372036854775807
    timer = (
        'export default { name: "Tick", version: "1", props: { timer: "$.interface.timer" },'
        " async run() {} };"
    )
    made = await api.client.post(
        "/v1/sources",
        json={"component_code": timer, "configured_props": {"timer": {"intervalSeconds": huge}}},
    )
    body = assert_error(made, 400, "invalid_props")
    assert "ten years" in body["error"], body
    workflow = await api.client.post(
        "/v1/workflows",
        json={
            "name": "t",
            "trigger": {"type": "timer", "intervalSeconds": huge},
            "steps": [{"name": "s", "code": "export default { async run() {} }"}],
        },
    )
    assert workflow.status_code == 400, workflow.text
    assert (await api.client.post("/v1/data_stores", json={"name": "ttl"})).status_code in (
        200,
        409,
    )
    put = await api.client.put("/v1/data_stores/ttl/records/k", json={"value": 1, "ttl": 1e30})
    assert assert_error(put, 400, "invalid_request")["field"] == "ttl"
    action = (
        'export default { name: "Ttl", version: "1", type: "action",'
        ' props: { store: { type: "data_store" } },'
        ' async run() { try { await this.store.set("k", 1, { ttl: 1e17 }); return "set"; }'
        " catch (e) { return e.message; } } };"
    )
    ran = await api.client.post(
        "/v1/actions/run", json={"component_code": action, "configured_props": {"store": "ttl"}}
    )
    assert ran.status_code == 200, ran.text
    assert "ten years" in ran.json()["data"]["ret"], ran.text
