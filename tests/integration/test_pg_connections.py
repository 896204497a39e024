"""PostgreSQL connections in the pool: a connection that sat idle is pinged before it is lent
again (one whose server side is gone is replaced, unseen), one in steady use is not; hot reads
send no BEGIN. Real PostgreSQL; a backend is cut with ``pg_terminate_backend``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.storage import database
from tests.conftest import PG_URL, SKIP_PG, _create_pg_database, _drop_pg_database


@pytest_asyncio.fixture
async def engine() -> AsyncIterator[AsyncEngine]:
    if SKIP_PG:
        pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
    made = database.create_engine(PG_URL)
    try:
        yield made
    finally:
        await made.dispose()


async def _backend(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(pid: int) -> None:
    admin = await asyncpg.connect(PG_URL, timeout=5)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


async def test_an_idle_connection_whose_backend_died_is_replaced_unseen(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend(engine)
    await _terminate(first)
    monkeypatch.setattr(database, "IDLE_PING_SECONDS", 0.0)  # every checkout counts as idle
    second = await _backend(engine)  # no error: the ping found it dead
    assert second != first


async def test_a_connection_in_steady_use_is_not_pinged_and_a_dead_one_fails_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "IDLE_PING_SECONDS", 3600.0)
    first = await _backend(engine)
    await _terminate(first)
    # Once: a lost connection is the store unavailable (a 503 with Retry-After at the edge).
    with pytest.raises(errors.StorageUnavailable):
        await _backend(engine)
    # SQLAlchemy saw the disconnect and replaced the pool's connections: the next use works.
    assert await _backend(engine) != first


async def test_a_hot_read_runs_outside_a_transaction(engine: AsyncEngine) -> None:
    reader = database.Reader(engine)

    def one_transaction(conn: sa.Connection) -> bool:
        # Two statements in one transaction (after a BEGIN) share its id; in autocommit each
        # statement is a transaction of its own.
        ids = [conn.execute(sa.text("SELECT txid_current()")).scalar_one() for _ in range(2)]
        return ids[0] == ids[1]

    assert not await reader(one_transaction)
    async with engine.connect() as conn:  # the engine's own connections: a transaction
        assert await conn.run_sync(one_transaction)


async def test_a_read_on_a_dead_connection_is_tried_again_afresh(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read is safe to repeat: one that met a connection the server dropped (a restart)
    runs again on a fresh one instead of answering 503 (an endpoint's lookup)."""
    monkeypatch.setattr(database, "IDLE_PING_SECONDS", 3600.0)  # lent without a ping
    reader = database.Reader(engine)
    first = await _backend(engine)
    await _terminate(first)
    pid = await reader(lambda conn: conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
    assert pid != first


async def test_a_transaction_left_idle_ends_within_3_8_of_a_lease() -> None:
    """A worker that stalls inside a transaction holds its jobs' rows locked, hidden from the
    other workers' claims (``SKIP LOCKED``), until PostgreSQL ends its session: 3/8 of a
    4 s lease here, so they are taken over within the lease (it was 15 s for every lease)."""
    if SKIP_PG:
        pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
    assert database.idle_tx_ms(4_000) == 1_500
    assert database.idle_tx_ms(30_000) == 11_250
    assert database.idle_tx_ms(600_000) == database.IDLE_TX_MS
    assert database.idle_tx_ms(100) == 1_000
    made = database.create_engine(PG_URL, idle_tx_ms=database.idle_tx_ms(4_000))
    try:
        conn = await made.connect()
        await conn.begin()
        pid = int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
        setting = await conn.execute(sa.text("SHOW idle_in_transaction_session_timeout"))
        assert setting.scalar_one() == "1500ms"
        admin = await asyncpg.connect(PG_URL, timeout=5)
        try:
            # PostgreSQL's own timer ends it: poll for that, bounded (1.5 s and the poll).
            for _ in range(100):
                if not await admin.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid
                ):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the idle transaction's session was not ended in 10 s")
        finally:
            await admin.close()
        with pytest.raises(errors.StorageUnavailable):  # its transaction is gone
            await conn.execute(sa.text("SELECT 1"))
        await conn.invalidate()
    finally:
        await made.dispose()


async def test_a_session_stopped_between_prepare_and_execute_is_ended() -> None:
    """asyncpg prepares with Parse, Describe and Flush, and binds after: between the two the
    session is "active" (PostgreSQL's idle timeout does not apply), and a process stopped there
    held its transaction's row locks for its whole stall (tests/chaos/test_stalls.py failed
    so under load). ``end_stalled_sessions`` ends such a session, past its bound only, and no
    session that is idle or working."""
    if SKIP_PG:
        pytest.skip("SLUICE_TEST_SKIP_POSTGRES=1")
    # A database of its own: the bound below is 0, and other tests' sessions are not this one's.
    url = await _create_pg_database()
    made = database.create_engine(url)
    # As Sluice's own sessions are named (``database.create_engine``).
    ours = {"application_name": database.APPLICATION_NAME}
    stopped = await asyncpg.connect(url, timeout=5, server_settings=ours)
    idle = await asyncpg.connect(url, timeout=5, server_settings=ours)
    # Another application's session on the same database and role, stopped the same way.
    other = await asyncpg.connect(url, timeout=5, server_settings={"application_name": "psql"})
    try:
        await stopped.execute(
            "CREATE TABLE locked (id int PRIMARY KEY); INSERT INTO locked VALUES (1)"
        )
        transaction = stopped.transaction()
        await transaction.start()
        await stopped.fetch("SELECT id FROM locked WHERE id = 1 FOR UPDATE")
        await stopped.prepare("SELECT now()")  # Parse, Describe, Flush: stopped here
        other_transaction = other.transaction()
        await other_transaction.start()
        await other.prepare("SELECT now()")
        idle_transaction = idle.transaction()
        await idle_transaction.start()
        await idle.fetch("SELECT 1")  # idle in a transaction: PostgreSQL's own timeout's
        pids = (stopped.get_server_pid(), idle.get_server_pid())
        async with made.connect() as conn:
            state = await conn.execute(
                sa.text("SELECT pid, state FROM pg_stat_activity WHERE pid = ANY(:p)"),
                {"p": list(pids)},
            )
            assert dict(state.all()) == {pids[0]: "active", pids[1]: "idle in transaction"}

        assert await database.end_stalled_sessions(made, older_than_ms=60_000) == []
        assert await database.end_stalled_sessions(made, older_than_ms=0) == [pids[0]]

        # Its row lock is free: a lock that waited for it would wait forever here.
        async with made.connect() as conn:
            await conn.execute(sa.text("SET LOCAL lock_timeout = '5s'"))
            row = await conn.execute(sa.text("SELECT id FROM locked WHERE id = 1 FOR UPDATE"))
            assert row.scalar_one() == 1
        # Its backend exits (pg_terminate_backend only signals it), and its client, once it
        # has read the FATAL message and the end of the stream, finds its connection gone; a
        # statement sent before it read them met asyncpg's half-consumed error state instead
        # ("cannot switch to state 11": CI, under load). Both polled, bounded.
        gone = sa.text("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = :p")
        for _ in range(100):
            async with made.connect() as conn:  # a transaction sees one snapshot of the view
                backend_gone = (await conn.execute(gone, {"p": pids[0]})).scalar_one()
            if backend_gone and stopped.is_closed():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the stalled session or its client was not gone in 10 s")
        with pytest.raises(asyncpg.InterfaceError):
            await stopped.fetch("SELECT 1")  # when the process wakes: its session is gone
        assert await idle.fetchval("SELECT 2") == 2  # the idle one goes on
        assert await other.fetchval("SELECT 3") == 3  # and the other application's
    finally:
        stopped.terminate()
        await idle.close()
        await other.close()
        await made.dispose()
        await _drop_pg_database(url)
