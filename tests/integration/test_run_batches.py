"""The batch path (docs/architecture.md, "The batch path"): a source's queued requests, claimed
together, run as one unit (``JobWorker._units``, ``HttpJobs.run_batch``) and stored in one
transaction (``Commit.sources``), on both dialects, with real Node. A run that throws fails
alone (its error path); a run whose results cannot be stored fails alone (its retry or lease
path); a batch whose claim was lost stores nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
import pytest_asyncio
import sqlalchemy as sa

from sluice import errors
from sluice.api.app import serving
from sluice.clock import FakeClock
from sluice.domain.outcomes import SourceResults
from sluice.domain.states import JobKind
from sluice.engine.queue.jobs import (
    BatchHandler,
    Finish,
    FinishMany,
    JobWorker,
    WorkerConfig,
    runs_batches,
)
from sluice.platform import Platform
from sluice.storage import database
from sluice.storage.jobs import Job
from sluice.storage.tables import events as events_table
from sluice.storage.tables import jobs as jobs_table
from tests.conftest import Api
from tests.integration.test_ingress import deploy

THROWS_ON_2 = """
export default {
  name: "Throws on 2",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    if (event.body.i === 2) throw new TypeError("two is bad");
    this.$emit(event.body);
  },
};
"""


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement any engine sends while the test runs."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", note)


def _trace(conn: sa.Connection, note: Callable[[str], object] | None) -> None:
    dbapi = database.sqlite_dbapi(conn)
    if dbapi is not None:
        dbapi.set_trace_callback(note)


@pytest_asyncio.fixture(loop_scope="session")
async def public(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(api.platform)),
        base_url="http://sluice.test",
        timeout=60,
    ) as client:
        yield client


async def _post(public: httpx.AsyncClient, path: str, n: int) -> None:
    for i in range(n):
        answer = await public.post(path, json={"i": i})
        assert answer.status_code == 200, answer.text


async def _events(platform: Platform, source_id: str) -> dict[str, list[Any]]:
    """The source's stored events by channel, oldest first."""
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(events_table.c.channel, events_table.c.payload)
            .where(events_table.c.emitter_id == source_id)
            .order_by(events_table.c.ts_ms)
        )
        found: dict[str, list[Any]] = {}
        for row in rows:
            found.setdefault(row.channel, []).append(row.payload)
        return found


async def _jobs(platform: Platform, source_id: str) -> list[tuple[str, int]]:
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.status, jobs_table.c.attempts)
            .where(jobs_table.c.target_id == source_id, jobs_table.c.kind == JobKind.HTTP)
            .order_by(jobs_table.c.id)
        )
        return [(row.status, row.attempts) for row in rows]


def _sizes(
    platform: Platform, source_id: str, invocation_ids: list[str] | None = None
) -> list[int]:
    """Records the size of every batch the invoker runs for the source (the platform is
    shared: a drain also runs what other test files left queued), and its runs' invocation
    ids in ``invocation_ids``."""
    sizes: list[int] = []
    invoker = platform.invoker
    run_many = invoker.run_many

    async def counting(deployment: Any, runs: Sequence[Any], **kwargs: Any) -> Any:
        outcomes = await run_many(deployment, runs, **kwargs)
        if deployment.id == source_id:
            sizes.append(len(runs))
            if invocation_ids is not None:
                invocation_ids.extend(outcome.invocation_id for outcome in outcomes)
        return outcomes

    invoker.run_many = counting  # type: ignore[method-assign]
    return sizes


async def test_a_run_that_throws_fails_alone_and_the_others_are_stored_once(
    api: Api, public: httpx.AsyncClient
) -> None:
    platform = api.platform
    source_id, path = await deploy(api, THROWS_ON_2)
    await _post(public, path, 5)
    invocation_ids: list[str] = []
    sizes = _sizes(platform, source_id, invocation_ids)
    try:
        await platform.jobs.drain()
    finally:
        del platform.invoker.run_many  # type: ignore[method-assign]
    assert sizes == [5]  # one batch: one claim, one runner call, one transaction
    # One random draw for the batch, an id of its own for each run.
    assert len(set(invocation_ids)) == 5 and {len(i) for i in invocation_ids} == {27}
    stored = await _events(platform, source_id)
    assert sorted(e["i"] for e in stored[""]) == [0, 1, 3, 4]  # each once
    [error] = stored["$errors"]  # the thrown run, on its error path
    assert error["error"]["name"] == "TypeError" and error["error"]["msg"] == "two is bad"
    assert error["original_event"]["body"] == {"i": 2}
    assert await _jobs(platform, source_id) == [("done", 1)] * 5


async def test_a_run_that_cannot_be_stored_fails_alone(api: Api) -> None:
    """``Commit.sources``: the transaction is made again without the run that raised; the
    others commit; its place holds the exception."""
    platform = api.platform
    source_id, _path = await deploy(api, THROWS_ON_2)
    deployment = await platform.sources.get(api.account_id, source_id)

    def results(i: int) -> SourceResults:
        return SourceResults(f"inv{i}", [{"event": {"i": i}, "meta": {}}], {}, [], [], None)

    def fenced(conn: sa.Connection) -> None:
        raise errors.LeaseLost()

    def broken(conn: sa.Connection) -> None:
        raise RuntimeError("cannot be stored")

    answers = await platform.commit.sources(
        deployment,
        None,
        [(results(0), None), (results(1), fenced), (results(2), broken), (results(3), None)],
    )
    assert isinstance(answers[1], errors.LeaseLost)
    assert isinstance(answers[2], RuntimeError)
    assert [len(a.event_ids) for a in (answers[0], answers[3])] == [1, 1]  # type: ignore[union-attr]
    assert sorted(e["i"] for e in (await _events(platform, source_id))[""]) == [0, 3]


async def test_one_statement_marks_a_batch_done_and_a_taken_over_job_is_not_stored(
    api: Api, statements: list[str]
) -> None:
    """``finish_many``: the batch's done marks in one statement, the events of its runs in
    one insert; a position whose claim is not current any more gets ``LeaseLost`` and none
    of its results."""
    platform = api.platform
    source_id, _path = await deploy(api, THROWS_ON_2)
    deployment = await platform.sources.get(api.account_id, source_id)
    marked: list[list[int]] = []

    def finish_many(conn: sa.Connection, positions: Sequence[int]) -> set[int]:
        marked.append(list(positions))
        return {p for p in positions if p != 1}  # the second was taken over

    runs = [
        (SourceResults(f"inv{i}", [{"event": {"i": i}, "meta": {}}], {}, [], [], None), None)
        for i in range(4)
    ]
    # On SQLite the hot statements run on the driver's cursor, which SQLAlchemy's events do not
    # see (database.sqlite_dbapi): the writer's own connection reports what it runs as well.
    await platform.commit.writer(lambda conn: _trace(conn, statements.append))
    statements.clear()
    try:
        answers = await platform.commit.sources(deployment, None, runs, finish_many=finish_many)
    finally:
        await platform.commit.writer(lambda conn: _trace(conn, None))
    assert marked == [[0, 1, 2, 3]]
    assert isinstance(answers[1], errors.LeaseLost)
    assert sorted(e["i"] for e in (await _events(platform, source_id))[""]) == [0, 2, 3]
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO EVENTS")]
    assert len(inserts) == 1  # one statement for the three runs' events


async def test_a_batchs_events_are_stored_as_their_columns_bind_values(api: Api) -> None:
    """The batch's one insert (on PostgreSQL arrays unnested server-side) stores what the
    columns' types would: a NUL or a lone surrogate in a payload read back as sent, in a
    channel replaced by U+FFFD; JSON null, non-ASCII text and the emit's meta as they were;
    the events' positions in order."""
    platform = api.platform
    source_id, _path = await deploy(api, THROWS_ON_2)
    deployment = await platform.sources.get(api.account_id, source_id)
    sent = [
        ({"s": "a\x00b", "t": "\ud800", "u": "h\u00e9 \u2603"}, {"name": "c\x00h", "id": "x"}),
        (None, {"name": "c\x00h"}),
        ([1, 2.5, True, {"k": "\x00"}], {"name": "c\x00h", "summary": "s\u00e9"}),
    ]
    runs = [
        (SourceResults(f"inv{i}", [{"event": event, "meta": meta}], {}, [], [], None), None)
        for i, (event, meta) in enumerate(sent)
    ]
    answers = await platform.commit.sources(deployment, None, runs)
    assert all(len(a.event_ids) == 1 for a in answers)  # type: ignore[union-attr]
    async with platform.db.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(events_table)
                .where(events_table.c.emitter_id == source_id)
                .order_by(events_table.c.ts_ms, events_table.c.seq)
            )
        ).all()
    assert [row.payload for row in rows] == [event for event, _meta in sent]
    assert [row.meta for row in rows] == [meta for _event, meta in sent]
    assert {row.channel for row in rows} == {"c\ufffdh"}
    assert [row.id for row in rows] == [a.event_ids[0] for a in answers]  # type: ignore[union-attr]
    assert all(row.owner_id == api.account_id and len(row.emit_id) == 27 for row in rows)


class _Stalling:
    """The ``http`` handler behind a stall (a SIGSTOP, a VM pause: no lease renewed) that
    starts once the batch is handed to it."""

    def __init__(self, inner: BatchHandler) -> None:
        self.inner = inner
        self.started, self.wake = asyncio.Event(), asyncio.Event()

    async def __call__(self, job: Job, finish: Finish) -> None:
        raise AssertionError("the batch path runs these jobs")

    async def run_batch(
        self, batch: Sequence[tuple[Job, Finish]], finish_many: FinishMany
    ) -> list[Exception | None]:
        self.started.set()
        await self.wake.wait()
        return await self.inner.run_batch(batch, finish_many)


async def test_a_batch_whose_claim_was_lost_stores_nothing(
    api: Api, public: httpx.AsyncClient
) -> None:
    """Fencing: a worker stalls with a claimed batch past its lease; another takes the jobs
    over and stores them; the first's runs, when it wakes, are refused with their done marks:
    every request is stored once."""
    platform = api.platform
    source_id, path = await deploy(api, THROWS_ON_2.replace("=== 2", "=== -1"))
    await _post(public, path, 4)
    handler = platform.jobs.handlers[JobKind.HTTP]
    assert isinstance(handler, BatchHandler)
    clock = FakeClock(int(time.time() * 1000) + 1000)  # past the requests' run_after
    stalling = _Stalling(handler)
    stalled = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000), {JobKind.HTTP: stalling})
    running = asyncio.create_task(stalled.run_once())
    await stalling.started.wait()

    clock.advance(seconds=31)
    other = JobWorker(platform.db, clock, WorkerConfig(lease_ms=30_000), {JobKind.HTTP: handler})
    assert await other.run_once() >= 4
    stalling.wake.set()
    await running
    stored = await _events(platform, source_id)
    assert sorted(e["i"] for e in stored[""]) == [0, 1, 2, 3]  # once each: the first stored none
    assert await _jobs(platform, source_id) == [("done", 2)] * 4
    stalled.writer.dispose()
    other.writer.dispose()


def test_whether_a_handler_runs_batches_is_read_from_its_class() -> None:
    """``runs_batches`` (remembered per class) answers as ``isinstance`` does, for a handler
    class with ``run_batch``, a plain handler function, a class without it, and no handler."""

    async def plain(job: Job, finish: Finish) -> None:
        return None

    class Alone:
        async def __call__(self, job: Job, finish: Finish) -> None:
            return None

    stalling = _Stalling.__new__(_Stalling)
    for handler in (stalling, plain, Alone(), None, stalling, plain):
        assert runs_batches(handler) is isinstance(handler, BatchHandler)
    assert runs_batches(stalling) and not runs_batches(plain) and not runs_batches(Alone())
