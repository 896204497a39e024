"""Group commit of new jobs (engine/queue/enqueuer.py over storage.database.Writer), on both
dialects: concurrent callers share transactions, each returns only once its job is committed,
a failed transaction fails its callers, and a write lock held elsewhere is waited for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa

from sluice.domain import text
from sluice.domain.states import JobKind
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.platform import Platform
from sluice.storage import jobs
from sluice.storage.jobs import NewJob
from sluice.storage.tables import jobs as jobs_table


@pytest_asyncio.fixture(loop_scope="session")
async def enqueuer(platform: Platform) -> AsyncIterator[Enqueuer]:
    e = Enqueuer(platform.db, platform.clock)
    yield e
    await e.close()


pytestmark = pytest.mark.usefixtures("empty_queue")  # jobs no drain here claims, then deleted


@pytest.fixture
def kind() -> JobKind:
    return JobKind.WORKFLOW


async def _payloads(platform: Platform, kind: JobKind) -> dict[int, Any]:
    async with platform.db.connect() as conn:
        rows = await conn.execute(
            sa.select(jobs_table.c.id, jobs_table.c.payload).where(jobs_table.c.kind == kind)
        )
        return {r.id: r.payload for r in rows}


async def test_concurrent_jobs_share_commits_and_get_their_ids(
    platform: Platform, enqueuer: Enqueuer, kind: JobKind
) -> None:
    seen: list[int] = []
    results = await asyncio.gather(
        *(
            enqueuer.enqueue(
                NewJob(kind, "u_x", "dc_x", {"i": i}), on_id=seen.append if i % 2 else None
            )
            for i in range(40)
        )
    )
    stored = await _payloads(platform, kind)
    assert sorted(p["i"] for p in stored.values()) == list(range(40))
    for i, job_id in enumerate(results):
        if i % 2:
            assert job_id is not None and stored[job_id] == {"i": i}
        else:
            assert job_id is None
    assert sorted(seen) == sorted(r for r in results if r is not None)


async def test_a_failed_transaction_fails_its_callers_only(
    platform: Platform, enqueuer: Enqueuer, kind: JobKind
) -> None:
    # SQLAlchemy's JSON bind fails on PostgreSQL; on SQLite the batch is serialized by hand.
    with pytest.raises((sa.exc.StatementError, TypeError)):
        await enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"not json": object()}))
    assert await _payloads(platform, kind) == {}
    await enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"ok": True}))
    assert list((await _payloads(platform, kind)).values()) == [{"ok": True}]


async def test_a_write_lock_held_elsewhere_is_waited_for(
    platform: Platform, enqueuer: Enqueuer, kind: JobKind
) -> None:
    async with platform.db.begin() as conn:
        # This transaction writes first (on SQLite it now holds the one write lock).
        await jobs.enqueue(
            conn, kind=kind, owner_id="u_x", target_id="dc_x", payload={"n": 1}, now_ms=1
        )
        task = asyncio.create_task(enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"n": 2})))
        for _ in range(3):
            await asyncio.sleep(0)  # the enqueuer tries, and must wait, not fail
        assert not task.done()
    await task
    assert sorted(p["n"] for p in (await _payloads(platform, kind)).values()) == [1, 2]


async def test_large_group_commits_mean_pressure(enqueuer: Enqueuer, kind: JobKind) -> None:
    """A lone request is no pressure; many sharing a commit are (the job worker yields)."""
    await enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"i": 0}))
    assert not enqueuer.pressed()
    await asyncio.gather(
        *(enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"i": i})) for i in range(1, 30))
    )
    assert enqueuer.pressed()


async def test_one_caller_after_another_is_never_left_waiting(
    enqueuer: Enqueuer, platform: Platform, kind: JobKind
) -> None:
    """Each caller resumes before its flusher's task has ended: the next job must still get a
    flush (a done-callback clearing the flusher comes a turn too late)."""
    for i in range(5):
        await asyncio.wait_for(enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", {"i": i})), 30)
    assert sorted(p["i"] for p in (await _payloads(platform, kind)).values()) == list(range(5))


async def test_a_batch_keeps_awkward_payloads_whole(
    platform: Platform, enqueuer: Enqueuer, kind: JobKind
) -> None:
    """Many jobs in one flush (one statement of arrays on PostgreSQL): NUL, a lone surrogate,
    non-ASCII text and deep values come back as given, each in its own job."""
    payloads: list[Any] = [
        {"s": "a\x00b"},
        "\ud800 alone",
        {"t": "é ✓ 😀", "n": [1, 2.5, None, True]},
        [[["deep"]]],
        None,
        *({"i": i} for i in range(20)),
    ]
    await asyncio.gather(*(enqueuer.enqueue(NewJob(kind, "u_x", "dc_x", p)) for p in payloads))
    stored = sorted(
        json.dumps(text.from_stored(p), sort_keys=True)
        for p in (await _payloads(platform, kind)).values()
    )
    assert stored == sorted(json.dumps(p, sort_keys=True) for p in payloads)
