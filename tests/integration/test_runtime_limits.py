"""Isolation and limits of the Node runtime, through the real pool: time-outs, memory, crashes,
environment, one process per account. Nothing here sleeps: every wait is on a real event."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sluice import errors
from sluice.engine.components.components import ComponentInput
from sluice.platform import Platform
from sluice.runtime.pool import Invocation
from tests.conftest import Api

HANGS = """
export default { name: "Hang", version: "1", type: "action",
  props: { mode: { type: "string" } },
  async run({ $ }) {
    if (this.mode === "sync") { while (true) {} }
    if (this.mode === "async") { for (;;) { await Promise.resolve(); } }
    if (this.mode === "memory") { const hog = []; for (;;) hog.push(new Array(1e5).fill(Math.random())); }
    if (this.mode === "respond-then-hang") { await $.respond({ status: 200 }); await new Promise(() => {}); }
    if (this.mode === "exit") { process.exit(3); }
    if (this.mode === "concurrent") { for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); }
    return { env: { ...process.env }, ok: true };
  } };
"""


async def _entry(platform: Platform, owner_id: str) -> str:
    saved = await platform.components.save(owner_id, ComponentInput(code=HANGS))
    return str(await platform.components.materialize(saved))


def _call(
    owner: str,
    entry: str,
    mode: str,
    *,
    key: str = "k",
    timeout_ms: int = 20_000,
    memory_mb: int = 64,
) -> Invocation:
    return Invocation(
        owner_id=owner,
        worker_key=key,
        entry=entry,
        timeout_ms=timeout_ms,
        memory_mb=memory_mb,
        call={"kind": "action", "props": {"mode": mode}, "db": {}, "steps": {}},
    )


async def test_timeouts_end_the_invocation_and_the_worker_recovers(api: Api) -> None:
    pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
    for mode in ("sync", "async"):
        result = await pool.invoke(_call(api.account_id, entry, mode, timeout_ms=300))
        assert not result.ok and result.error is not None
        assert result.error["code"] == "TIMEOUT", result.error
    after = await pool.invoke(_call(api.account_id, entry, "fine"))
    assert after.ok and after.value["ok"] is True


async def test_memory_limit_ends_the_invocation_not_the_service(api: Api) -> None:
    pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
    other = pool.invoke(_call(api.account_id, entry, "fine", key="other"))
    result = await pool.invoke(_call(api.account_id, entry, "memory", key="hog", memory_mb=32))
    assert not result.ok and result.error["code"] == "OUT_OF_MEMORY", result.error
    assert (await other).ok
    assert (await pool.invoke(_call(api.account_id, entry, "fine", key="hog"))).ok


async def test_process_exit_in_user_code_stops_only_its_worker(api: Api) -> None:
    pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
    result = await pool.invoke(_call(api.account_id, entry, "exit", key="exiter"))
    assert not result.ok and result.error["code"] == "WORKER_STOPPED"
    assert (await pool.invoke(_call(api.account_id, entry, "fine", key="exiter"))).ok


async def test_a_crashed_runner_fails_in_flight_calls_and_is_replaced(api: Api) -> None:
    pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
    await pool.invoke(_call(api.account_id, entry, "fine"))
    runner = pool.runner(api.account_id)
    assert runner is not None
    first_pid = runner.pid
    killed = asyncio.Event()

    def kill_on_respond(_response: object) -> None:
        runner.kill()
        killed.set()

    # The crash is raised once, where the runtime's answer enters the engine.
    with pytest.raises(errors.RunnerCrashed):
        await pool.invoke(_call(api.account_id, entry, "respond-then-hang"), kill_on_respond)
    assert killed.is_set()
    again = await pool.invoke(_call(api.account_id, entry, "fine"))
    assert again.ok
    replacement = pool.runner(api.account_id)
    assert replacement is not None and replacement.pid != first_pid


async def test_user_code_sees_no_host_environment(api: Api) -> None:
    os.environ["SLUICE_TEST_HOST_SECRET"] = "do-not-leak"
    try:
        pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
        result = await pool.invoke(_call(api.account_id, entry, "fine", key="env"))
        assert result.ok and result.value["env"] == {}
        runner = pool.runner(api.account_id)
        assert runner is not None and runner.pid is not None
        environ = Path(f"/proc/{runner.pid}/environ").read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0] for item in environ if item}
        # The sandbox's launcher (sh) sets PWD; nothing of the host's environment is there.
        assert names <= {b"PATH", b"PWD"}
    finally:
        del os.environ["SLUICE_TEST_HOST_SECRET"]
    code = (
        'export default { name: "Env", version: "1", async run() { return { ...process.env }; } };'
    )
    source = await api.client.post("/v1/sources", json={"component_code": code})
    source_id = source.json()["data"]["id"]
    run = (await api.client.post(f"/v1/sources/{source_id}/run", json={})).json()["data"]
    assert run["value"] == {"PD_COMPONENT": source_id}


async def test_each_account_gets_its_own_runner_process(api: Api, other_api: Api) -> None:
    code = 'export default { name: "Pid", version: "1", async run() { return process.pid; } };'
    for client in (api.client, other_api.client):
        source = (await client.post("/v1/sources", json={"component_code": code})).json()["data"]
        run = (await client.post(f"/v1/sources/{source['id']}/run", json={})).json()["data"]
        assert isinstance(run["value"], int)
    runners = [api.platform.pool.runner(a.account_id) for a in (api, other_api)]
    assert runners[0] is not None and runners[1] is not None
    assert runners[0].pid != runners[1].pid


async def test_concurrent_invocations_keep_their_own_emits_and_logs(api: Api) -> None:
    code = """
export default { name: "Concurrent", version: "1",
  async run(event) {
    for (let i = 0; i < 5; i++) {
      console.log(`run ${event.n} step ${i}`);
      this.$emit({ n: event.n, i });
      await new Promise((resolve) => setImmediate(resolve));
    }
    return event.n;
  } };
"""
    source = (await api.client.post("/v1/sources", json={"component_code": code})).json()["data"]
    runs = await asyncio.gather(
        *[
            api.client.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": n}})
            for n in range(6)
        ]
    )
    for n, response in enumerate(runs):
        data = response.json()["data"]
        assert data["value"] == n
        assert len(data["emitted"]) == 5
        assert [log["msg"] for log in data["logs"]] == [f"run {n} step {i}" for i in range(5)]
    page = (
        await api.client.get(
            f"/v1/sources/{source['id']}/event_summaries", params={"expand": "event"}
        )
    ).json()
    assert page["page_info"]["total_count"] == 30
    assert len({e["id"] for e in page["data"]}) == 30


async def test_user_code_writing_to_fd_1_cannot_corrupt_the_protocol(api: Api) -> None:
    """The protocol has its own descriptor: raw writes to fd 1 are logged, and the call still
    gets its own answer (here the runner's time-out), not a broken channel."""
    from sluice.runtime.pool import PoolConfig, RunnerPool

    code = """
import fs from "node:fs";
export default { name: "Fd1", version: "1", type: "action",
  async run() { fs.writeSync(1, "garbage without newline "); await new Promise(() => {}); } };
"""
    saved = await api.platform.components.save(api.account_id, ComponentInput(code=code))
    entry = str(await api.platform.components.materialize(saved))
    async with RunnerPool(PoolConfig(deadline_grace_seconds=0.5)) as pool:
        result = await pool.invoke(
            Invocation(
                owner_id="u_fd1",
                worker_key="k",
                entry=entry,
                timeout_ms=1000,  # the garbage precedes the runner's own time-out answer
                memory_mb=64,
                call={"kind": "action", "props": {}, "db": {}, "steps": {}},
            )
        )
        assert not result.ok and result.error["code"] == "TIMEOUT", result.error
        fine = await pool.invoke(
            Invocation(
                owner_id="u_fd1",
                worker_key="k2",
                entry=str(await _entry(api.platform, api.account_id)),
                timeout_ms=20_000,
                memory_mb=64,
                call={"kind": "action", "props": {"mode": "ok"}, "db": {}, "steps": {}},
            )
        )
        assert fine.ok


async def test_more_accounts_than_runner_slots_under_concurrency(api: Api) -> None:
    """Accounts starting runners at once never evict the same runner twice, nor one in use."""
    from sluice.runtime.pool import PoolConfig, RunnerPool

    entry = await _entry(api.platform, api.account_id)
    async with RunnerPool(PoolConfig(max_runners=1)) as pool:
        for round_ in range(3):
            # Busy runners push the pool over its soft cap; the next round's new accounts then
            # start at once and each evicts several idle runners.
            owners = [f"u_slot{round_}_{i}" for i in range(8)]
            results = await asyncio.gather(
                *[
                    pool.invoke(
                        _call(owner, entry, "concurrent" if n % 2 else "fine", key=f"k{round_}{n}")
                    )
                    for n in range(3)
                    for owner in owners
                ]
            )
            assert [r.error for r in results if not r.ok] == []


async def test_invoke_many_sends_one_message_and_answers_each_call(api: Api) -> None:
    """The batch path (``RunnerPool.invoke_many``): one ``invoke_batch`` for the calls of one
    worker key, what they share sent once; each call its own result, its own time-out, and
    its own ``respond``."""
    pool, entry = api.platform.pool, await _entry(api.platform, api.account_id)
    await pool.invoke(_call(api.account_id, entry, "fine", key="many"))
    runner = pool.runner(api.account_id)
    assert runner is not None
    sent: list[bytes] = []
    channel = runner._writer  # what goes over the protocol socket
    assert channel is not None
    write = channel.write
    channel.write = lambda data: (sent.append(data), write(data))[1]  # type: ignore[method-assign]
    heard: list[int] = []
    try:
        results = await pool.invoke_many(
            [
                _call(api.account_id, entry, "fine", key="many", timeout_ms=400),
                _call(api.account_id, entry, "respond-then-hang", key="many", timeout_ms=400),
                _call(api.account_id, entry, "concurrent", key="many", timeout_ms=400),
            ],
            [None, lambda response: heard.append(response.status or 0), None],
        )
    finally:
        del channel.write  # type: ignore[method-assign]
    assert [len(sent), sent[0].count(b'"type":"invoke_batch"'), sent[0].count(b'"mode"')] == [
        1,
        1,
        3,
    ]
    assert sent[0].count(b'"db"') == 1  # shared: sent once
    assert results[0].ok and results[2].ok
    assert results[1].error is not None and results[1].error["code"] == "TIMEOUT"
    assert heard == [200]
    # A runner that dies mid-batch: raised once, for the whole batch.
    with pytest.raises(errors.RunnerCrashed):
        await pool.invoke_many(
            [
                _call(api.account_id, entry, "respond-then-hang", key="crash"),
                _call(api.account_id, entry, "concurrent", key="crash"),
            ],
            [lambda _response: runner.kill(), None],
        )
