"""Chaos (issue 30): a process stalled (SIGSTOP) while it holds SQLite's write lock, beside a
real ``sluice serve`` on the same database file.

The stalled process is a small helper, not a Sluice process: it takes the write lock
(``BEGIN IMMEDIATE``) and stops itself, so the lock is held at a known moment for as long as
the test wants (a Sluice process stopped mid-transaction would hold it only by chance). From
SQLite's side the two are the same: another connection holds the lock and does not move.
While it is stopped the endpoint answers 503 ``storage_unavailable`` with ``Retry-After`` (it
answered 500 ``internal_error`` before: SQLite's "database is locked" was not translated),
each request within a bounded time, never a 500; once it resumes and lets go, the same server
takes requests again. The first write waits SQLite's busy timeout for the lock (the database
URL's ``timeout``: 10 s by default, ``BUSY_S`` here, so the test does not idle 10 s); after
it the file is marked stalled and writes are refused within ``STALLED_PATIENCE_S`` (0.5 s)
instead of queueing on the engine's one connection behind each other (answers took up to
40.8 s so before). Every acknowledged request is stored exactly once, and no refused one.

Every request goes to 127.0.0.1; the loops are bounded in count and time.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.chaos.processes import Sluice, free_port, running, stored_sqlite
from tests.chaos.test_restarts import _check, _deploy, _env, _settled

#: Takes the write lock, says so, stops itself; once continued, lets go and exits.
HOLDER = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
conn.execute("ROLLBACK")
conn.close()
"""
#: SQLite's busy timeout in this test, seconds (``?timeout=`` on the database URL).
BUSY_S = 2.0
#: How long one request may take, stalled or not: longer is a hang. The first writes wait
#: for the lock up to SQLite's busy timeout each, in turn on the engine's connection, behind
#: whatever was writing when the stall began (the job worker's claims and leases too): with
#: the default 10 s, 10.1 s measured on a quiet machine, over 20 s at load 10.
ANSWER_S = 60.0
#: Once a request was answered 503, how long each later one during the stall may take: the
#: file is marked stalled and a write is refused within ``database.STALLED_PATIENCE_S``
#: (0.5 s measured; before, each waited its own busy timeout behind the others: 40.8 s).
LATER_S = 5.0
#: How long the lock is held at least (the requests meanwhile must all be answered): just past
#: the busy timeout; the loop then goes on until the first 503 and three answers after it
#: (it was 15 s, then 11 s with the default busy timeout: idle time of the suite's).
STALL_S = BUSY_S + 1.0


@pytest.mark.timeout(300)
def test_a_stalled_sqlite_lock_holder_is_503_then_recovered(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="sluice-sqlite-stall-") as directory:
        asyncio.run(_stall(Path(directory) / "data"))


async def _stall(data: Path) -> None:
    env = _env(data, f"sqlite:///{data / 'sluice.db'}?timeout={BUSY_S:g}")
    server = Sluice("all", env, port=free_port())
    base = f"http://127.0.0.1:{server.port}"
    statuses: dict[int, int] = {}
    acked: set[int] = set()
    refused: set[int] = set()
    slowest = 0.0

    async def send(http: httpx.AsyncClient, n: int) -> httpx.Response:
        nonlocal slowest
        started = time.monotonic()
        answer = await http.post(path, json={"n": n})
        slowest = max(slowest, time.monotonic() - started)
        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
        (acked if answer.status_code == 200 else refused).add(n)
        return answer

    with running(server):
        server.start()
        source_id, path = _deploy(base, env)
        async with httpx.AsyncClient(base_url=base, timeout=ANSWER_S) as http:
            for n in range(20):
                assert (await send(http, n)).status_code == 200
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(data / "sluice.db")],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert holder.stdout is not None
                assert holder.stdout.readline().strip() == "locked"
                until = time.monotonic() + 30
                while Path(f"/proc/{holder.pid}/stat").read_text().split()[2] != "T":
                    assert time.monotonic() < until, "the lock holder did not stop"
                    await asyncio.sleep(0.05)
                # Stalled with the lock: every request answered, 503 with Retry-After.
                n, stalled_until, seen_503 = 1000, time.monotonic() + STALL_S, None
                later: list[float] = []  # how long each request after the first 503 took
                # Past the first 503 (which may come after the stall's planned end under
                # load), a few more requests are sent while the lock is still held.
                while time.monotonic() < stalled_until or (
                    len(later) < 3 and time.monotonic() < stalled_until + ANSWER_S
                ):
                    asked = time.monotonic()
                    answer = await send(http, n)
                    if seen_503 is not None:
                        later.append(time.monotonic() - asked)
                    n += 1
                    if answer.status_code == 503:
                        seen_503 = answer
                        await asyncio.sleep(0.1)  # as a client told to retry later
                assert seen_503 is not None, statuses
                assert max(later) < LATER_S, later
                assert seen_503.json()["code"] == "storage_unavailable", seen_503.text
                assert int(seen_503.headers["Retry-After"]) > 0
                # The API's reads go on (WAL: readers do not wait for the writer).
                assert (await http.get("/healthz")).status_code == 200
            finally:
                holder.send_signal(signal.SIGCONT)
                holder.wait(timeout=30)
                if holder.stdout is not None:
                    holder.stdout.close()
            # Let go: the same process takes requests again.
            recovered_by = time.monotonic() + 30
            n = 2000
            while (await send(http, n)).status_code != 200:
                assert time.monotonic() < recovered_by, statuses
                n += 1
                await asyncio.sleep(0.1)
            for n in range(3000, 3020):
                answer = await send(http, n)
                assert answer.status_code == 200, (n, answer.text, server.tail())
        assert set(statuses) <= {200, 503}, f"answers other than 200 and 503: {statuses}"
        assert slowest < ANSWER_S, slowest

        numbers, states = await _settled(
            lambda: asyncio.to_thread(stored_sqlite, data / "sluice.db", source_id)
        )
        _check(acked, numbers, states)
        stored_refused = sorted(refused & set(numbers))
        assert not stored_refused, f"refused (503) yet stored: {stored_refused}"
