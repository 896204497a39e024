"""What other processes committed, pushed to this one at once (PostgreSQL).

Triggers (migrations 0009, 0011, 0025) NOTIFY at commit: ``sluice_jobs`` with the accounts' ids
when their jobs are added or queued again, ``sluice_events`` with the emitter's id when its
events or log lines are stored, ``sluice_workflows`` when workflow rows change. Each
process listens on one connection of its own: a new job wakes its job worker now instead of
at its next poll, a live stream (SSE) of that emitter reads storage now instead of at its
next poll, and a run's read of its workflow keeps its copy while no change was pushed
(``PushedChanges``). Polling stays, as the fallback: while the listener reconnects (the
database restarted) nothing is lost, only later, and no copy of a workflow is trusted. SQLite
has no such push (one process, or polling; its workflows have a shared counter instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

JOBS = "sluice_jobs"
EVENTS = "sluice_events"
WORKFLOWS = "sluice_workflows"
#: How often an idle listener checks that its connection still answers, seconds.
CHECK_SECONDS = 10.0
#: The wait before connecting again after the connection was lost, seconds.
RECONNECT_SECONDS = 1.0


def plain_url(url: str) -> str:
    """The database URL as asyncpg takes it (no SQLAlchemy driver name)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PushedChanges:
    """Changes to workflow rows, counted as the database pushes them (``sluice_workflows``) and
    as this process makes them (``bump``): what ``engine/components/workflows.Workflows`` reads
    on PostgreSQL where SQLite has its shared ``ChangeCounter``. ``value()`` is None while no
    listener hears the pushes (not yet connected, or reconnecting): then no copy is trusted and
    each run reads its workflow's stamp. A change another process commits is seen once its
    notification arrives (as a request that read the stamp just before that commit would run
    the workflow as it was); a lost connection counts as a change."""

    def __init__(self) -> None:
        self._count = 0
        self._heard = False

    def value(self) -> int | None:
        return self._count if self._heard else None

    def bump(self) -> None:
        self._count += 1

    def hearing(self, heard: bool) -> None:
        """The listener connected (True: whatever changed meanwhile counts as a change) or
        lost its connection (False)."""
        self._heard = heard
        self.bump()


class Notifications:
    def __init__(
        self,
        url: str,
        on_jobs: Callable[[str | None, bool], None],
        on_stored: Callable[[str], None],
        workflows: PushedChanges | None = None,
    ) -> None:
        """``on_jobs(owner_id, due_now)``: jobs of that account were added or queued again
        (None: of some account), all due at once or not; ``on_stored(emitter_id)``: events or
        log lines of it were stored; ``workflows``: counts the changes to workflow rows."""
        self.url = plain_url(url)
        self.on_jobs = on_jobs
        self.on_stored = on_stored
        self.workflows = workflows
        self._task: asyncio.Task[None] | None = None
        #: Set while a connection listens (tests wait for it).
        self.listening = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("the database's notifications stopped (%s); reconnecting", exc)
            finally:
                if self.workflows is not None:
                    self.workflows.hearing(False)
            self.listening.clear()
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen(self) -> None:
        conn = await asyncpg.connect(self.url, timeout=10)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(JOBS, self._jobs)
            await conn.add_listener(EVENTS, self._events)
            if self.workflows is not None:
                await conn.add_listener(WORKFLOWS, self._workflows)
                self.workflows.hearing(True)
            self.listening.set()
            self.on_jobs(None, False)  # anything added while nobody listened
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CHECK_SECONDS):
                        await lost.wait()
                if not lost.is_set():
                    await conn.fetchval("SELECT 1", timeout=10)  # a silent loss shows here
        finally:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)

    def _jobs(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        # The accounts whose jobs were added, and "~" when one is due later (migration 0011);
        # no account named: some account's.
        names = payload.split()
        due_now = "~" not in names and bool(names)
        owners: list[str | None] = [name for name in names if name != "~"] or [None]
        for owner_id in owners:
            self.on_jobs(owner_id, due_now)

    def _events(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.on_stored(payload)

    def _workflows(self, _conn: Any, _pid: int, _channel: str, _payload: str) -> None:
        if self.workflows is not None:
            self.workflows.bump()
