"""Whether the HTTP endpoints take new requests: load shedding on backlog, and the disk's
reserve (the decisions: ``domain/admission.py``).

Asked on every endpoint request (``check``), so it costs a dict lookup: what it looks at is
read by a background task every ``refresh_s`` (a quarter second; an async context manager),
never per request. Each refresh reads each account's oldest due job and due queued jobs, and
the jobs enqueued since the last refresh (two grouped reads, off the event loop), and, on
SQLite, the free space of the database's file system (``statvfs``).

- **Backlog.** An account whose backlog waits longer than ``shed_after_ms`` (its oldest due
  job's age, or its queued jobs at the pace they run: see ``domain/admission.py``; a rate is
  never measured across a storage outage) gets
  503 ``overloaded`` with ``Retry-After`` on its endpoints until it is back under the bound:
  it is the one sending more than the workers run. Between two
  reads each ``check`` counts the request, and an account is taken at most its room
  (``admission.room``: what its run rate, else the process's, gets through in a quarter of the
  bound, less its backlog), so the wait stays under the bound instead of overshooting it by
  what one interval takes.
- **Requests first yields to a backlog.** ``pace()`` (``admission.worker_pace``) sets the job
  worker's pace (``engine/queue/jobs.py``): under a burst, requests first runs one unit at a
  time with a pause after each; once some account's backlog waits past ``requests_first_ms``
  the units run back to back (paused, a backlog cannot keep a sustained load's events stored
  within a second of their request: at 5,000 requests a second it stored ~4,000 a second,
  `bench/pipeline.py`), and past ``admission.FULL_AFTER`` times that wait (more comes in than
  one unit at a time runs) or an eighth of the bound (under the quarter its room aims at) every
  slot runs, so it is run before it is shed.
- **Disk reserve.** With less than ``reserve_bytes`` free, every endpoint gets 503
  ``storage_unavailable``: the space left is for the work already accepted (its runs' events,
  the jobs' done marks, a WAL checkpoint), so acknowledged work can always finish. Space
  back, requests are taken again at the next refresh, with no restart.

Tests leave the task off and call ``refresh()`` with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sluice import errors, metrics
from sluice.clock import Clock
from sluice.domain import admission
from sluice.storage import database, faults, job_stats

log = logging.getLogger(__name__)

#: What ``Retry-After`` says while the disk is down to its reserve, seconds.
DISK_RETRY_AFTER_S = 30


@dataclass(frozen=True)
class AdmissionPolicy:
    #: An account whose oldest due job waited longer than this is shed, ms; 0: never.
    shed_after_ms: int
    #: Below this much free disk (SQLite's file system), no new request is taken, bytes; 0: off.
    reserve_bytes: int
    #: Requests first holds only while every account's backlog waits less than this, ms;
    #: 0: only the shedding bound's eighth counts.
    requests_first_ms: int = 0
    #: Seconds between two reads of the queue and the disk. Short: until the next read a
    #: burst goes on being taken (at 2,000 requests a second, a second of it is a backlog of
    #: 20 s at the rate a busy 2-core machine runs them); a read is a few ms off the loop.
    refresh_s: float = 0.25


class Admission:
    def __init__(self, reader: database.Reader, clock: Clock, policy: AdmissionPolicy) -> None:
        self.reader = reader
        self.clock = clock
        self.policy = policy
        #: The directory whose file system the reserve is kept on (None: PostgreSQL).
        self.disk: Path | None = None if reader.sqlite_path is None else reader.sqlite_path.parent
        #: ``{owner_id: Retry-After seconds}`` of the accounts shed now.
        self._shed: dict[str, int] = {}
        self._disk_low = False
        #: The oldest due job's wait at the last refresh, ms (any account; 0 when none).
        self.oldest_age_ms = 0
        #: From the last read: the largest job id, when, each account's due queued jobs, and
        #: the run rate (jobs a second) of each account that had a backlog throughout.
        self._max_id: int | None = None
        self._read_at: int | None = None
        self._queued: dict[str, int] = {}
        self._rates: dict[str, float] = {}
        #: Each backlogged account's rate as last measured, and the span since
        #: (``admission.measure``); ``_rates`` holds the pace they give (``admission.pace``).
        self._measured: dict[str, float] = {}
        self._spans: dict[str, admission.Span] = {}
        #: ``faults.unavailable_count()`` at the last read.
        self._faults = faults.unavailable_count()
        #: Every account's jobs run a second (``admission.capacity``: measured while there is
        #: a backlog, kept through idle spells); None until some job ran.
        self.process_rate: float | None = None
        #: Requests each account may still be taken until the next read (set at its first
        #: request after a read: ``admission.room``).
        self._room: dict[str, int] = {}
        #: The longest wait of any account's backlog at the last read, ms.
        self.longest_wait_ms = 0
        self._task: asyncio.Task[None] | None = None

    def check(self, owner_id: str) -> None:
        """Raises ``errors.StorageUnavailable`` while the disk is down to its reserve, and
        ``errors.Overloaded`` while ``owner_id``'s backlog is older than the bound. Every
        endpoint request is checked; one that will queue a job is then ``take``n."""
        if self._disk_low:
            metrics.refused("disk_reserve")
            raise errors.StorageUnavailable(
                "the server's disk is down to its reserve: no new requests are taken until "
                "space is freed; retry later",
                retry_after_seconds=DISK_RETRY_AFTER_S,
            )
        retry = self._shed.get(owner_id)
        if retry is not None:
            raise self._overloaded(retry)

    def take(self, owner_id: str) -> None:
        """Count a request that queues a job against ``owner_id``'s room until the next read
        (``admission.room``); ``errors.Overloaded`` when none is left. A request that runs at
        once while its client waits (a workflow answering with ``$.respond``: no job) is not
        taken: it adds nothing to the backlog (taken, 46% of a 64-connection load on such a
        workflow was refused with no backlog at all: the room assumed the minimum rate, for
        no jobs ran)."""
        # Counted only between reads (none yet: tests that drive it by hand, a start).
        if self.policy.shed_after_ms <= 0 or self._read_at is None:
            return
        left = self._room.get(owner_id)
        if left is None:
            rate = self._rates.get(owner_id) or max(self.process_rate or 0.0, admission.MIN_RATE)
            left = admission.room(
                rate=rate, queued=self._queued.get(owner_id, 0), bound_ms=self.policy.shed_after_ms
            )
        if left > 0:
            self._room[owner_id] = left - 1
            return
        self._room[owner_id] = 0
        raise self._overloaded(admission.MIN_RETRY_S)  # its room is counted again next read

    def _overloaded(self, retry: int) -> errors.Overloaded:
        metrics.refused("overloaded")
        return errors.Overloaded(
            "this account's queued work waits longer than this server allows "
            f"({self.policy.shed_after_ms / 1000:g} s): its endpoints take no new requests "
            f"until it catches up; retry in {retry} s",
            retry_after_seconds=retry,
        )

    async def refresh(self) -> None:
        """Read the queue's backlog per account and the disk's free space now."""
        if self.policy.shed_after_ms > 0 or self.policy.requests_first_ms > 0:
            now = self.clock.now_ms()
            after = self._max_id
            read = await self.reader.in_thread(lambda conn: job_stats.backlog(conn, now, after))
            waits = self._waits(read, now)
            self._max_id, self._read_at = read.max_id, now
            self.oldest_age_ms = max((now - due for due, _ in read.due.values()), default=0)
            self.longest_wait_ms = max(waits.values(), default=0)
            bound = self.policy.shed_after_ms
            shed = admission.shed(waits, bound_ms=bound)
            self._room = {}
            if shed.keys() != self._shed.keys():
                log.warning(
                    "load shedding: %d account(s) over the backlog bound (oldest due job %.1f s, "
                    "longest wait %.1f s)",
                    len(shed),
                    self.oldest_age_ms / 1000,
                    max(waits.values(), default=0) / 1000,
                    extra={"action": "shed", "owner_ids": sorted(shed)},
                )
            self._shed = shed
        if self.disk is not None and self.policy.reserve_bytes > 0:
            stat = await asyncio.to_thread(os.statvfs, self.disk)
            low = admission.disk_low(
                free_bytes=stat.f_bavail * stat.f_frsize, reserve_bytes=self.policy.reserve_bytes
            )
            if low != self._disk_low:
                log.warning(
                    "the disk is %s its reserve of %d MiB: new requests %s",
                    "down to" if low else "back above",
                    self.policy.reserve_bytes >> 20,
                    "refused (503)" if low else "taken again",
                    extra={"action": "disk_reserve"},
                )
            self._disk_low = low

    def pace(self, *, pressed: bool) -> admission.Pace:
        """The job worker's pace now (``admission.worker_pace``), ``pressed`` the endpoints'
        saturation, the backlog's wait as of the last read."""
        return admission.worker_pace(
            pressed=pressed,
            wait=self.longest_wait_ms,
            bound_ms=self.policy.shed_after_ms,
            requests_first_ms=self.policy.requests_first_ms,
        )

    def _waits(self, read: job_stats.Backlog, now: int) -> dict[str, int]:
        """Each backlogged account's wait (``admission.wait_ms``), its run rate measured over
        the interval since the last read when it had a backlog throughout."""
        seconds = (now - self._read_at) / 1000 if self._read_at is not None else 0.0
        # The store failed since the last read (a stalled SQLite lock holder, PostgreSQL
        # down): what ran meanwhile says nothing of the rate; every span starts again.
        faults_now = faults.unavailable_count()
        outage, self._faults = faults_now != self._faults, faults_now
        measured: dict[str, float] = {}
        rates: dict[str, float] = {}
        spans: dict[str, admission.Span] = {}
        waits: dict[str, int] = {}
        for owner, (oldest, queued) in read.due.items():
            rate = self._measured.get(owner)
            span = self._spans.get(owner)
            if span is not None and seconds > 0 and not outage:
                rate, span = admission.measure(
                    rate, span, added=read.added.get(owner, 0), queued_now=queued, seconds=seconds
                )
            else:
                span = admission.Span(queued)
            spans[owner] = span
            if rate is not None:
                measured[owner] = rate
            pace = admission.pace(rate, span)
            if pace is not None:
                rates[owner] = pace
            waits[owner] = admission.wait_ms(age_ms=now - oldest, queued=queued, rate=pace)
        self._spans, self._measured = spans, measured
        if seconds > 0 and not outage:
            self.process_rate = admission.capacity(
                self.process_rate,
                queued_before=sum(self._queued.values()),
                added=sum(read.added.values()),
                queued_now=sum(queued for _, queued in read.due.values()),
                seconds=seconds,
            )
        # An account whose backlog ran out is measured afresh next time.
        self._rates = rates
        self._queued = {owner: queued for owner, (_, queued) in read.due.items()}
        return waits

    async def __aenter__(self) -> Admission:
        self._task = asyncio.create_task(self._loop(), name="sluice-admission")
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except errors.StorageUnavailable:
                pass  # logged where it entered; the last state stands until the next read
            except Exception:
                log.exception("could not read the backlog and the disk's free space")
            await asyncio.sleep(self.policy.refresh_s)
