"""A realm per deployment (issue 25): deployments of one account cannot observe or change each
other's values through what the JS engine shares (built-in prototypes, ``globalThis``, built-in
modules), and an action's or a source's code never reads the account's environment variables,
not even in a callback that runs after its step.

Each test is an attacker's component run through the REST API of a real platform (SQLite; the
runtime does not depend on the dialect). Every one of them leaked on the code before the change,
when a runner's worker thread held many deployments of the account and ``steps.mjs`` swapped
the invocation's environment in place.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from sluice.platform import Platform
from tests.conftest import Api, account_client, make_settings


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def realms(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    settings = make_settings(tmp_path_factory.mktemp("realms"))
    async with Platform.open(settings, background=False) as platform:
        yield platform


@pytest_asyncio.fixture(loop_scope="session")
async def account(realms: Platform) -> AsyncIterator[Api]:
    name = f"tenant-{secrets.token_hex(3)}"
    async with account_client(realms, name, f"{name}@example.com") as a:
        yield a


async def _source(api: Api, code: str) -> str:
    created = await api.client.post("/v1/sources", json={"component_code": code})
    assert created.status_code == 200, created.text
    source_id: str = created.json()["data"]["id"]
    return source_id


async def _run_source(api: Api, source_id: str, event: Any = None) -> Any:
    ran = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": event or {}})
    assert ran.status_code == 200, ran.text
    data = ran.json()["data"]
    assert data["ok"], data
    return data["value"]


async def _workflow(api: Api, steps: list[dict[str, Any]]) -> str:
    body = {"name": "wf", "trigger": {"type": "manual"}, "steps": steps}
    created = await api.client.post("/v1/workflows", json=body)
    assert created.status_code == 200, created.text
    workflow_id: str = created.json()["data"]["id"]
    return workflow_id


async def _run_workflow(api: Api, workflow_id: str) -> list[Any]:
    ran = await api.client.post(f"/v1/workflows/{workflow_id}/runs", json={"event": {}})
    assert ran.status_code == 200, ran.text
    return [s["return_value"] for s in ran.json()["data"]["steps"]]


def _code_step(name: str, body: str) -> dict[str, Any]:
    return {"name": name, "code": f"export default defineComponent({{ {body} }});"}


async def _set_env(api: Api, value: str) -> None:
    put = await api.client.put("/v1/env_vars/API_TOKEN", json={"value": value})
    assert put.status_code == 200, put.text


async def test_an_actions_timer_reads_no_environment_after_its_step(account: Api) -> None:
    token = f"tok-{secrets.token_hex(4)}"
    await _set_env(account, token)
    key = f"timer-spy-{secrets.token_hex(3)}"
    spy = (
        "export default { name: 'Timer spy', key: '" + key + "', version: '0.0.1', type: 'action',"
        " props: { mode: { type: 'string' } },"
        " async run() {"
        "   if (this.mode === 'arm') {"
        "     setTimeout(() => { globalThis.leaked = { ...process.env }; }, 0);"
        "     return 'armed';"
        "   }"
        "   return globalThis.leaked ?? null;"
        " } };"
    )
    saved = await account.client.post("/v1/components", json={"component_code": spy})
    assert saved.status_code == 200, saved.text
    workflow = await _workflow(
        account,
        [
            {"name": "arm", "action": key, "props": {"mode": "arm"}},
            # The code step waits, so the action's timer fires while the run goes on.
            _code_step(
                "wait",
                "async run() { await new Promise((r) => setTimeout(r, 20));"
                " return process.env.API_TOKEN ?? null; }",
            ),
            {"name": "read", "action": key, "props": {"mode": "read"}},
        ],
    )
    armed, seen_by_code_step, leaked = await _run_workflow(account, workflow)
    assert armed == "armed"
    assert seen_by_code_step == token  # the code step itself does read it
    assert leaked == {}, f"the action's timer read the environment: {leaked}"


async def test_a_module_top_level_reads_no_environment(account: Api) -> None:
    await _set_env(account, "top-level-secret")
    workflow = await _workflow(
        account,
        [
            {
                "name": "top",
                "code": "const atLoad = process.env.API_TOKEN ?? null;\n"
                "export default defineComponent({ async run() {"
                " return { atLoad, inRun: process.env.API_TOKEN ?? null }; } });",
            }
        ],
    )
    (value,) = await _run_workflow(account, workflow)
    assert value == {"atLoad": None, "inRun": "top-level-secret"}


async def test_a_patched_json_stringify_never_sees_another_deployments_values(
    account: Api,
) -> None:
    token = f"tok-{secrets.token_hex(4)}"
    await _set_env(account, token)
    spy = await _source(
        account,
        "const seen = [];\n"
        "const original = JSON.stringify;\n"
        "JSON.stringify = function (value, ...rest) {"
        " try { seen.push(original(value)); } catch {} return original(value, ...rest); };\n"
        "export default { name: 'Stringify spy', version: '1',"
        " async run() { return seen.filter((s) => s.includes('tok-')); } };",
    )
    assert await _run_source(account, spy) == []
    workflow = await _workflow(
        account,
        [
            _code_step(
                "send", "async run() { return JSON.stringify({ t: process.env.API_TOKEN }); }"
            )
        ],
    )
    assert await _run_workflow(account, workflow) == [f'{{"t":"{token}"}}']
    leaked = await _run_source(account, spy)
    assert not any(token in s for s in leaked), leaked


async def test_a_patched_map_get_never_reads_another_deployments_db(account: Api) -> None:
    secret = f"db-secret-{secrets.token_hex(4)}"
    victim = await _source(
        account,
        "export default { name: 'Keeper', version: '1', props: { db: '$.service.db' },"
        " async run(event) { if (event?.set) this.db.set('secret', event.set);"
        " return this.db.get('secret') ?? null; } };",
    )
    assert await _run_source(account, victim, {"set": secret}) == secret
    spy = await _source(
        account,
        "const seen = [];\n"
        "const original = Map.prototype.get;\n"
        "Map.prototype.get = function (key) {"
        " try { seen.push(JSON.stringify([...this.entries()])); } catch {}"
        " return original.call(this, key); };\n"
        "export default { name: 'Map spy', version: '1',"
        " async run() { return seen.filter((s) => s.includes('db-secret')); } };",
    )
    assert await _run_source(account, spy) == []
    assert await _run_source(account, victim) == secret
    leaked = await _run_source(account, spy)
    assert leaked == [], leaked


async def test_globals_and_builtin_modules_are_the_deployments_own(account: Api) -> None:
    writer = await _source(
        account,
        "import os from 'node:os';\n"
        "export default { name: 'Writer', version: '1', async run() {"
        " globalThis.sharedSecret = 'from-writer'; os.hostname = () => 'patched';"
        " Array.prototype.includes = () => true; return 'written'; } };",
    )
    reader = await _source(
        account,
        "import os from 'node:os';\n"
        "export default { name: 'Reader', version: '1', async run() {"
        " return { global: globalThis.sharedSecret ?? null, host: os.hostname() === 'patched',"
        " includes: [].includes(1) }; } };",
    )
    assert await _run_source(account, reader) == {"global": None, "host": False, "includes": False}
    assert await _run_source(account, writer) == "written"
    after = await _run_source(account, reader)
    assert after == {"global": None, "host": False, "includes": False}, after
