"""The runner port (``runtime/port.py``): the engine runs against any ``Runner``. With the
in-package ``FakeRunner`` no Node is needed; a crash is raised once, as ``RunnerCrashed``, and
a job hit by one runs again while a run by hand reports it."""

from __future__ import annotations

from sluice import errors
from sluice.clock import FakeClock
from sluice.domain.states import JobKind
from sluice.engine.handlers.timer import TimerJobs
from sluice.engine.queue.jobs import JobWorker, RanNow
from sluice.engine.runs.invoker import Invoker
from sluice.platform import Platform
from sluice.runtime import protocol
from sluice.runtime.port import FakeRunner, Invocation
from sluice.runtime.protocol import Result
from sluice.storage import events, jobs
from tests.conftest import Api
from tests.integration.test_jobs import _status
from tests.integration.test_sources_api import deploy

SOURCE = 'export default { name: "Fake", version: "1", async run(event) { this.$emit(event); } };'


def _invoker(platform: Platform, runner: FakeRunner) -> Invoker:
    p = platform
    return Invoker(
        p.db,
        runner,
        p.components,
        p.cipher,
        p.settings,
        p.clock,
        p.commit,
        p.reader,
        credentials=p.credentials,
    )


async def test_the_invoker_stores_what_a_fake_runner_answers(api: Api) -> None:
    source = await deploy(api, SOURCE)
    deployment = await api.platform.sources.get(api.account_id, source["id"])

    def answer(inv: Invocation) -> Result:
        assert inv.call["kind"] == "run" and inv.call["event"] == {"n": 1}
        return Result(ok=True, emits=[{"event": {"faked": True}, "meta": {}}])

    runner = FakeRunner(answer)
    outcome = await _invoker(api.platform, runner).invoke(
        deployment, {"kind": "run", "event": {"n": 1}}
    )
    assert outcome.result.ok and len(runner.calls) == 1
    async with api.platform.db.connect() as conn:
        page = await events.page(conn, source["id"], limit=10)
    assert [e.payload for e in page.items] == [{"faked": True}]


async def test_a_crash_is_raised_once_a_job_runs_again_a_manual_run_reports_it(
    api: Api, platform: Platform
) -> None:
    source = await deploy(api, SOURCE)
    deployment = await platform.sources.get(api.account_id, source["id"])

    def crash(_inv: Invocation) -> Result:
        raise errors.RunnerCrashed("the fake runner died")

    invoker = _invoker(platform, FakeRunner(crash))
    # By hand: the caller gets the crash as the run's error, as documented.
    outcome = await invoker.invoke(deployment, {"kind": "run", "event": {}})
    assert outcome.result.error is not None
    assert outcome.result.error["code"] == protocol.RUNNER_CRASHED

    # As a job: the handler lets it go up, the worker queues the job again, nothing is done.
    clock = FakeClock(platform.clock.now_ms())
    worker = JobWorker(
        platform.db,
        clock,
        handlers={JobKind.TIMER: TimerJobs(platform.reader, invoker, platform.executor)},
    )
    async with platform.db.begin() as conn:
        job_id = await jobs.enqueue(
            conn,
            kind=JobKind.TIMER,
            owner_id=api.account_id,
            target_id=source["id"],
            payload={"timestamp": 1},
            now_ms=clock.now_ms(),
        )
    assert await worker.run_now(job_id) is RanNow.AGAIN  # the crash: it runs again
    assert await _status(platform, job_id) == ("queued", 1)


async def test_the_fake_records_evictions() -> None:
    runner = FakeRunner(lambda _inv: Result(ok=True))
    await runner.evict("u_1", "dc_1:*")
    assert runner.evicted == [("u_1", "dc_1:*")]
