"""What storing a webhook workflow's run costs Python, against Node-RED's whole request.

Issue 29's goal 1 asks for a webhook workflow (1 code step, ``$.respond``, the run stored) at
Node-RED's rate on one core. The design named to pass it is a front that takes the request and
runs the steps in Node, and hands each finished run to Python to store (the batch path's
writer). Python's share of that design is what this measures, with Sluice's own code and no
HTTP, no Node in the window:

  record   the run built from the runner's result, as ``Executor.execute`` builds it after
           the runner answers (its context, its ``$.flow`` URLs, ``Executor._record``:
           ``domain/outcomes.py`` and the ``Run``)
  store    the run stored by ``Commit.run`` through its group commit (the run, its event
           and logs, the usage charge, the ``$errors`` and send checks): ``--group`` runs at a
           time, as ``wrk -c64`` keeps 64 in flight

each as CPU µs a run (``time.process_time`` of this process, pinned to CPU 0: the SQLite
writes run inline on the event loop's thread). The result stored is a real one: the workflow
runs once through its endpoint first and its runner's answer is kept.

The baseline, in the same round: Node-RED 4.1 with ``../shared/bench/side_by_side.py``'s flow
(http in -> function -> http response), ``wrk -c64`` on CPU 1, its process on CPU 0; its CPU a
request from ``/proc`` over the window. A front of that design fits Node-RED's budget only if
``record + store`` leaves room in it for the HTTP request and the step in Node.

Run:  .venv/bin/python bench/run_writer.py [--rounds 3] [--runs 20000] [--group 64]
      [--postgres postgresql://postgres@127.0.0.1:5432/postgres]  (a fresh database there)
Needs wrk and Node-RED (installed by side_by_side on first use) unless ``--no-nodered``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "shared" / "bench"))

from bench._server import create_database, drop_database, environment, table  # noqa: E402
from sluice import ids  # noqa: E402
from sluice.api.app import serving  # noqa: E402
from sluice.config import Settings  # noqa: E402
from sluice.engine.runs import executor as executor_module  # noqa: E402
from sluice.engine.runs.pauses import FlowUrls  # noqa: E402
from sluice.platform import Platform  # noqa: E402
from sluice.runtime import protocol  # noqa: E402
from sluice.runtime.protocol import Response, Result  # noqa: E402

#: The step of side_by_side.py's Sluice workflow: the same work as Node-RED's function node.
STEP = (
    "export default defineComponent({ async run({ steps, $ }) { const p = steps.trigger.event.body;"
    " await $.respond({ status: 200,"
    " body: Object.assign({}, p, { step1: true, ts1: Date.now() }) })"
    " } })"
)


@dataclasses.dataclass
class Captured:
    """What one real run gave: the workflow, its event, and its runner's answer."""

    workflow: Any = None
    event: Any = None
    result: Result | None = None
    responses: list[Response] = dataclasses.field(default_factory=list)


async def _one_real_run(
    platform: Platform, client: httpx.AsyncClient, key: str, owner_id: str
) -> Captured:
    headers = {"Authorization": f"Bearer {key}"}
    made = await client.post(
        "/v1/workflows",
        json={
            "name": "bench",
            "trigger": {"type": "http", "custom_response": True},
            "steps": [{"name": "step1", "code": STEP}],
            "active": True,
        },
        headers=headers,
    )
    assert made.status_code == 200, made.text
    workflow = made.json()["data"]
    captured = Captured()
    pool = platform.executor.pool
    real_invoke = pool.invoke

    async def invoke(invocation: Any, on_respond: Any = None) -> Result:
        def responded(response: Response) -> None:
            captured.responses.append(response)
            if on_respond is not None:
                on_respond(response)

        result = await real_invoke(invocation, responded)
        captured.result = result
        captured.event = invocation.call["event"]
        return result

    platform.executor.pool = _Proxy(pool, invoke)  # type: ignore[assignment]
    try:
        path = "/e/" + workflow["endpoint_url"].rsplit("/", 1)[1]
        answer = await client.post(path, json={"n": 1, "text": "a webhook's body"})
        assert answer.status_code == 200 and answer.json()["step1"] is True, answer.text
    finally:
        platform.executor.pool = pool
    captured.workflow = await platform.workflows.current(owner_id, workflow["id"])
    assert captured.result is not None and captured.result.ok, captured.result
    return captured


class _Proxy:
    """The runner pool with ``invoke`` replaced (the rest passed through)."""

    def __init__(self, pool: Any, invoke: Any) -> None:
        self._pool = pool
        self.invoke = invoke

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def _record(platform: Platform, got: Captured) -> Any:
    """The run as ``Executor.execute`` builds it once its runner has answered."""
    executor = platform.executor
    workflow = got.workflow
    assert got.result is not None
    now_ms = executor.clock.now_ms()
    run_id = ids.random_token(27)
    context = executor_module._context(workflow, run_id, now_ms, "HTTP", None, ())
    urls = FlowUrls.new(executor.settings.public_url_for(workflow.owner_id))
    urls.call(run_id)
    run, db_writes = executor._record(
        workflow, context, got.event, got.result, list(got.responses), now_ms, None, urls
    )
    return run, db_writes


async def _prepare(platform: Platform, got: Captured) -> bytes:
    """Today's path before the runner, for comparison: the run's call and its ``invoke`` line
    (``Executor.execute`` up to ``RunnerPool._call``, the sandbox's paths aside)."""
    executor = platform.executor
    workflow = got.workflow
    run_id = ids.random_token(27)
    context = executor_module._context(workflow, run_id, executor.clock.now_ms(), "HTTP", None, ())
    urls = FlowUrls.new(executor.settings.public_url_for(workflow.owner_id))
    call = await executor._workflow_call(workflow, got.event, context, urls.call(run_id), None)
    env = await executor.workflows.env_vars.values(workflow.owner_id)
    inv = executor._invocation(workflow, call, env)
    message = {
        "type": "invoke",
        "worker_key": inv.worker_key,
        "entry": str(inv.entry),
        "env": inv.env or {},
        "limits": {"timeout_ms": inv.timeout_ms, "memory_mb": inv.memory_mb},
        "call": inv.call,
        "id": 1,
    }
    return protocol.encode(message)


def _result_line(got: Captured) -> bytes:
    """The runner's ``result`` line for the captured run, as the runner writes it."""
    result = got.result
    assert result is not None
    return protocol.encode(
        {
            "type": "result",
            "id": 1,
            "ok": result.ok,
            "value": result.value,
            "emits": result.emits,
            "db_writes": result.db_writes,
            "db_deletes": result.db_deletes,
            "exports": result.exports,
            "flow_exit": result.flow_exit,
            "sends": result.sends,
            "steps": result.steps,
            "logs": result.logs,
            "error": result.error,
            "duration_ms": result.duration_ms,
        }
    )


async def _measure(platform: Platform, got: Captured, runs: int, group: int) -> dict[str, float]:
    commit = platform.executor.commit
    workflow = got.workflow
    started = time.process_time()
    for _ in range(runs):
        await _prepare(platform, got)
    prepare_s = time.process_time() - started
    line = _result_line(got)
    started = time.process_time()
    for _ in range(runs):
        protocol.decode_result(protocol.decode(line), line)
    decode_s = time.process_time() - started
    built: list[Any] = []
    started = time.process_time()
    for _ in range(runs):
        built.append(_record(platform, got))
    record_s = time.process_time() - started

    async def store(run: Any, db_writes: Any) -> None:
        stored = await commit.run(
            run,
            global_errors=workflow.global_errors,
            db_writes=db_writes,
            hops=(),
            mark_done=None,
        )
        assert stored

    started = time.process_time()
    wall = time.perf_counter()
    for at in range(0, runs, group):
        await asyncio.gather(*(store(run, writes) for run, writes in built[at : at + group]))
    store_s = time.process_time() - started
    wall_s = time.perf_counter() - wall
    return {
        "prepare_us": prepare_s / runs * 1e6,
        "decode_us": decode_s / runs * 1e6,
        "record_us": record_s / runs * 1e6,
        "store_us": store_s / runs * 1e6,
        "store_wall_per_s": runs / wall_s,
    }


def _nodered_us(seconds: int) -> tuple[float, float]:
    """Node-RED's CPU a request and its requests/s under ``wrk -c64`` (side_by_side's flow)."""
    import ab_webhook  # this folder's: the CPU of a process tree from /proc
    import side_by_side as sbs

    proc, url, _ = sbs.start_nodered(Path("."))
    try:
        sbs.wrk(url, 4, 2)  # warm-up
        before = sum(ab_webhook.tree_cpu(proc.p.pid).values())
        result = sbs.wrk(url, 64, seconds)
        after = sum(ab_webhook.tree_cpu(proc.p.pid).values())
    finally:
        proc.stop()
    requests = max(1.0, result["rps"] * seconds)
    return (after - before) / requests * 1e6, result["rps"]


async def _round(args: argparse.Namespace, url: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="sluice-writer-") as tmp:
        overrides: dict[str, Any] = {
            "data_dir": Path(tmp),
            "http_rate_per_second": 0,
            "run_retention": 10_000_000,
            "event_retention": 10_000_000,
        }
        if url is not None:
            overrides["database_url"] = url
        settings = Settings.from_env({}, **overrides)
        async with Platform.open(settings, background=False) as platform:
            account, key = await platform.create_account("writer", "w@example.com")
            transport = httpx.ASGITransport(app=serving(platform))
            async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
                got = await _one_real_run(platform, client, key, account.id)
            await _measure(platform, got, min(2000, args.runs), args.group)  # warm
            return await _measure(platform, got, args.runs, args.group)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20_000)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=5, help="Node-RED's window each round")
    ap.add_argument("--postgres", default="", help="an admin URL: a fresh database there")
    ap.add_argument("--no-nodered", action="store_true")
    args = ap.parse_args()
    os.sched_setaffinity(0, {0})
    print(environment(), flush=True)
    rows = []
    for round_no in range(1, args.rounds + 1):
        nodered_us, nodered_rps = (0.0, 0.0) if args.no_nodered else _nodered_us(args.seconds)
        url = asyncio.run(create_database(args.postgres)) if args.postgres else None
        try:
            # uvloop, as ``sluice serve`` runs (its sockets' I/O is part of a store on PostgreSQL).
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                got = runner.run(_round(args, url))
        finally:
            if url is not None:
                asyncio.run(drop_database(args.postgres, url))
        both = got["record_us"] + got["store_us"]
        share = both / nodered_us if nodered_us else float("nan")
        rows.append(
            [round_no, nodered_rps, nodered_us, got["record_us"], got["store_us"], both, share,
             got["prepare_us"], got["decode_us"]]
        )  # fmt: skip
        print(rows[-1], flush=True)
    print(
        table(
            [
                "round",
                "nodered_rps",
                "nodered_us",
                "record_us",
                "store_us",
                "both_us",
                "of_nodered",
                "prepare_us",
                "decode_us",
            ],
            rows,
        )
    )
    print("of_nodered: Python's share of a run in the design (record + store), over Node-RED's")
    print("whole request; prepare and decode: today's path's call to the runner and its answer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
