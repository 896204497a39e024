"""Account data stores on both dialects: ``/v1/data_stores``, the ``data_store`` prop's async API
from real workflow steps (a protocol round trip per call), concurrent writers, the size limit,
TTLs on a fake clock, and accounts that never reach each other's stores."""

from __future__ import annotations

import asyncio
from typing import Any

from sluice import errors
from sluice.clock import FakeClock
from sluice.config import Settings
from tests.conftest import Api
from tests.integration.test_flow import opened, settings, setup
from tests.integration.test_workflows import create, run, step

__all__ = ["settings"]  # the fixture, shared with test_flow


async def make_store(api: Api, name: str) -> dict[str, Any]:
    response = await api.client.post("/v1/data_stores", json={"name": name})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


USES = step(
    "use",
    'props: { store: { type: "data_store" } }, async run({ steps, $ }) { const s = this.store; '
    'await s.set("a", { n: 1 }); await s.set("b", new Date(0)); await s.set("gone", 1); '
    'await s.delete("gone"); const seen = []; for await (const [k, v] of s) seen.push([k, v]); '
    'return { a: await s.get("a"), missing: await s.get("nope") ?? "undefined", '
    'has: [await s.has("a"), await s.has("gone")], keys: await s.keys(), '
    "entries: await s.entries(), seen }; }",
    {"store": "shared"},
)


async def test_stores_over_the_api_and_from_a_step(api: Api, other_api: Api) -> None:
    store = await make_store(api, "shared")
    assert store["id"].startswith("ds_") and store["record_count"] == 0
    assert (await api.client.post("/v1/data_stores", json={"name": "shared"})).status_code == 409
    assert (await api.client.post("/v1/data_stores", json={"name": "../x"})).status_code == 400

    workflow = await create(api, [USES])
    result = await run(api, workflow["id"], {})
    assert result["status"] == "success", result
    value = result["steps"][0]["return_value"]
    assert value["a"] == {"n": 1} and value["missing"] == "undefined"
    assert value["has"] == [True, False] and value["keys"] == ["a", "b"]
    assert value["entries"] == [["a", {"n": 1}], ["b", "1970-01-01T00:00:00.000Z"]]
    assert value["seen"] == value["entries"]

    by_name = (await api.client.get("/v1/data_stores/shared")).json()["data"]
    assert by_name["id"] == store["id"] and by_name["record_count"] == 2
    put = await api.client.put(f"/v1/data_stores/{store['id']}/records/c/d", json={"value": [1, 2]})
    assert put.status_code == 200, put.text
    record = (await api.client.get("/v1/data_stores/shared/records/c/d")).json()["data"]
    assert record == {"key": "c/d", "value": [1, 2]}
    listed = (await api.client.get("/v1/data_stores/shared/records")).json()["data"]
    assert [r["key"] for r in listed] == ["a", "b", "c/d"]
    assert (await api.client.delete("/v1/data_stores/shared/records/a")).status_code == 200
    assert (await api.client.get("/v1/data_stores/shared/records/a")).status_code == 404
    mine = (await api.client.get("/v1/users/me/data_stores")).json()["data"]
    assert [s["name"] for s in mine] == ["shared"]

    # Another account: never sees it, by id or by name; its own "shared" is another store.
    for ref in (store["id"], "shared"):
        assert (await other_api.client.get(f"/v1/data_stores/{ref}")).status_code == 404
        missing = await other_api.client.get(f"/v1/data_stores/{ref}/records")
        assert missing.status_code == 404
    assert (await other_api.client.get("/v1/users/me/data_stores")).json()["data"] == []
    theirs = step(
        "peek",
        'props: { store: { type: "data_store" } }, async run() { return await this.store.keys(); }',
        {"store": store["id"]},
    )
    peek = await run(other_api, (await create(other_api, [theirs]))["id"], {})
    assert peek["status"] == "error"
    assert "no data store" in peek["error"]["msg"]

    assert (await api.client.delete("/v1/data_stores/shared/records")).status_code == 200
    assert (await api.client.get("/v1/data_stores/shared")).json()["data"]["record_count"] == 0
    assert (await api.client.delete("/v1/data_stores/shared")).status_code == 200
    assert (await api.client.get(f"/v1/data_stores/{store['id']}")).status_code == 404


async def test_concurrent_runs_all_write_and_the_limit_holds(api: Api) -> None:
    await make_store(api, "busy")
    writes = step(
        "write",
        'props: { store: { type: "data_store" } }, async run({ steps }) { '
        "const n = steps.trigger.event.n; await this.store.set(`k${n}`, n); "
        'await this.store.set("last", n); return n; }',
        {"store": "busy"},
    )
    workflow = await create(api, [writes])
    runs = await asyncio.gather(*(run(api, workflow["id"], {"n": n}) for n in range(8)))
    assert all(r["status"] == "success" for r in runs)
    records = (await api.client.get("/v1/data_stores/busy/records")).json()["data"]
    values = {r["key"]: r["value"] for r in records}
    assert {f"k{n}": n for n in range(8)}.items() <= values.items()
    assert values["last"] in range(8)

    # Concurrent big writes: some are refused, and the store never passes the limit.
    platform = api.platform
    cap = platform.settings.max_db_bytes
    big = "x" * (cap // 4)

    async def put(i: int) -> bool:
        try:
            await platform.data_stores.call(api.account_id, "busy", "set", key=f"big{i}", value=big)
        except errors.DataStoreFull:
            return False
        return True

    stored = await asyncio.gather(*(put(i) for i in range(8)))
    assert 0 < sum(stored) < 8
    assert (await api.client.get("/v1/data_stores/busy")).json()["data"]["size_bytes"] <= cap

    # A step going over the limit fails with the store's error; nothing was written.
    over = step(
        "over",
        'props: { store: { type: "data_store" } }, async run() { '
        f'await this.store.set("huge", "y".repeat({cap})); }}',
        {"store": "busy"},
    )
    failed = await run(api, (await create(api, [over]))["id"], {})
    assert failed["status"] == "error" and failed["error"]["code"] == "data_store_full"
    over_api = await api.client.put("/v1/data_stores/busy/records/huge", json={"value": big * 5})
    assert over_api.status_code == 413 and over_api.json()["code"] == "data_store_full"


async def test_ttls_expire_on_the_clock(settings: Settings) -> None:
    clock = FakeClock()
    ttl = step(
        "ttl",
        'props: { store: { type: "data_store" } }, async run({ steps }) { const s = this.store; '
        'if (steps.trigger.event.write) { await s.set("short", 1, { ttl: 60 }); '
        'await s.set("kept", 2, { ttl: 60 }); await s.setTtl("kept", null); '
        'await s.set("later", 3); await s.setTtl("later", 10); return null; } '
        'return { keys: await s.keys(), short: await s.get("short") ?? null }; }',
        {"store": "cache"},
    )
    key, workflow_id = await setup(settings, clock, [ttl])
    async with opened(settings, clock, key) as s:
        assert (await s.client.post("/v1/data_stores", json={"name": "cache"})).status_code == 200
        await s.run(workflow_id, {"write": True})
        first = (await s.run(workflow_id, {}))["steps"][0]["return_value"]
        assert first == {"keys": ["kept", "later", "short"], "short": 1}
        clock.advance(seconds=11)
        later = (await s.run(workflow_id, {}))["steps"][0]["return_value"]
        assert later["keys"] == ["kept", "short"]
        clock.advance(seconds=50)
        last = (await s.run(workflow_id, {}))["steps"][0]["return_value"]
        assert last == {"keys": ["kept"], "short": None}
        info = (await s.client.get("/v1/data_stores/cache")).json()["data"]
        assert info["record_count"] == 1


async def test_sources_and_actions_use_stores_too(api: Api) -> None:
    await make_store(api, "counts")
    source = (
        'export default { name: "Counter", version: "0.0.1", '
        'props: { store: { type: "data_store" } }, '
        'async run() { const n = ((await this.store.get("n")) ?? 0) + 1; '
        'await this.store.set("n", n); this.$emit({ n }); } };'
    )
    deployed = await api.client.post(
        "/v1/sources", json={"component_code": source, "configured_props": {"store": "counts"}}
    )
    assert deployed.status_code == 200, deployed.text
    source_id = deployed.json()["data"]["id"]
    for _ in range(2):
        ran = (await api.client.post(f"/v1/sources/{source_id}/run", json={})).json()["data"]
        assert ran["ok"], ran
    action = (
        'export default { name: "Read", version: "0.0.1", type: "action", '
        'props: { store: { type: "data_store" } }, '
        'async run({ $ }) { return await this.store.get("n"); } };'
    )
    response = await api.client.post(
        "/v1/actions/run", json={"component_code": action, "configured_props": {"store": "counts"}}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["ret"] == 2
