"""Whether an HTTP endpoint takes a request now: load shedding on backlog and the disk's
reserve. Pure: the queue's and the disk's state in, a refusal (with its ``Retry-After``) out.

An account is shed (its endpoints answer 503 ``overloaded``) while the wait of its backlog is
over the bound. That wait is the oldest due job's age, or, when the account's backlog ran at a
measured rate through the last interval, the time that rate needs to run the backlog, whichever
is longer: with the age alone, an endpoint taking 2,000 requests a second while its jobs run
300 a second would queue 20,000 jobs (10 s of requests) before the first refusal, and those
would wait a minute more. Other accounts are not shed: the job worker's shares
(``domain/shares.py``) keep their jobs moving, so their own backlog stays young. When every
account's backlog is old, every account is shed, each on its own.

>>> shed({"u_a": 95_000, "u_b": 2_000}, bound_ms=60_000)
{'u_a': 35}
>>> shed({"u_a": 95_000}, bound_ms=0)
{}
>>> rate = run_rate(None, queued_before=4_000, added=2_000, queued_now=5_700, seconds=1.0)
>>> rate, wait_ms(age_ms=1_500, queued=5_700, rate=rate)
(300.0, 19000)

Between two reads of the queue each request counts, so an account is taken at most its
``room``: the jobs a run rate gets through in a quarter of the bound, less its backlog (the
rest is headroom for the rate to fall, as it does when a flood of refused requests takes the
CPU: with half the bound the lag still reached 13.5 and 16 s against a 10 s bound). Shedding
only at each read let one interval's intake through whatever it was (at 2,000 requests a
second, a quarter second is 500 jobs, and under such a flood a read comes late: 1,500 were
taken before the first refusal, 30 s of work at the 50 runs a second of that moment), so the
wait overshot the bound threefold. The rate is the account's own when measured; else the
process's (every account's jobs run a second: ``capacity``, kept through idle spells) but at
least ``MIN_RATE``, so a burst on a server that has run nothing yet is taken ``MIN_RATE`` x a
quarter of the bound before a rate is measured. A rate kept through an idle spell is as stale
as the spell is long: a machine that became busier meanwhile is found out at the reads that
follow (each halves the distance to what runs now), as when it becomes busier under load.

>>> room(rate=400.0, queued=600, bound_ms=10_000)
400
>>> room(rate=50.0, queued=600, bound_ms=10_000)
0
>>> room(rate=None, queued=0, bound_ms=10_000)
50
>>> disk_low(free_bytes=10 << 20, reserve_bytes=64 << 20)
True
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

#: A shed client is told to come back in at least this many seconds, at most that many.
MIN_RETRY_S = 1
MAX_RETRY_S = 60
#: The weight of the last interval in an account's smoothed run rate.
RATE_WEIGHT = 0.5
#: The run rate assumed while none is measured, jobs a second (a starved worker on a loaded
#: 2-core machine ran ~25 a second in bench/wal_burst.py).
MIN_RATE = 20.0
#: The share of the bound an account's backlog is let grow to (at its run rate).
ROOM_SHARE = 0.25


def run_rate(
    previous: float | None, *, queued_before: int, added: int, queued_now: int, seconds: float
) -> float:
    """An account's due jobs taken off its queue a second (claimed by a worker), over an
    interval in which it had a backlog throughout, smoothed with the previous rate."""
    ran = max(0, queued_before + added - queued_now) / max(seconds, 1e-3)
    return ran if previous is None else previous + RATE_WEIGHT * (ran - previous)


@dataclass(frozen=True)
class Span:
    """An account's backlog since its run rate was last measured: its due jobs then, the jobs
    added since, the seconds since, and the reads since (each one at which nothing ran)."""

    queued: int
    added: int = 0
    seconds: float = 0.0
    reads: int = 0


def measure(
    previous: float | None, span: Span, *, added: int, queued_now: int, seconds: float
) -> tuple[float | None, Span]:
    """An account's measured run rate after one more read of a backlog it had throughout, and
    the span the next read extends. A rate is measured only over a span in which some job
    ran: until one does the reads add up, and what ran is counted over the whole time it took.
    Until then the decisions use ``pace``, which falls at each such read.

    Each read at which nothing ran was measured a rate of 0 before, and smoothed into the
    rate, so after a pause the rate was what it had fallen to: a worker that ran nothing for
    10 s (a store stalled, one long job) left ~1e-12 a second, and once it ran again the
    account's room was a few jobs (CI: 503 to the 11th request after a 15 s SQLite stall had
    ended). Jobs that took 2 s each, read four times a second, measured 4 a second at each
    read that saw one end, halved at each other: ~2 a second for a pace of 0.5.

    >>> span = Span(queued=10)
    >>> rate, span = measure(None, span, added=0, queued_now=10, seconds=0.25)
    >>> rate, span
    (None, Span(queued=10, added=0, seconds=0.25, reads=1))
    >>> for _ in range(6):
    ...     rate, span = measure(rate, span, added=0, queued_now=10, seconds=0.25)
    >>> measure(rate, span, added=0, queued_now=9, seconds=0.25)
    (0.5, Span(queued=9, added=0, seconds=0.0, reads=0))

    A worker that ran 100 a second, then nothing for 10 s, then 10 jobs in a quarter second:
    100 smoothed with what it ran over the whole span, not with what it had fallen to.

    >>> span = Span(queued=500)
    >>> for _ in range(40):
    ...     rate, span = measure(100.0, span, added=0, queued_now=500, seconds=0.25)
    >>> rate, span.seconds, pace(rate, span) < 1e-9
    (100.0, 10.0, True)
    >>> measure(rate, span, added=0, queued_now=490, seconds=0.25)[0]
    50.48780487804878
    """
    span = Span(span.queued, span.added + added, span.seconds + seconds, span.reads + 1)
    if span.queued + span.added - queued_now <= 0:
        return previous, span
    rate = run_rate(
        previous,
        queued_before=span.queued,
        added=span.added,
        queued_now=queued_now,
        seconds=span.seconds,
    )
    return rate, Span(queued_now)


def pace(rate: float | None, span: Span) -> float | None:
    """The run rate an account's wait and room are reckoned at: its measured ``rate``, lowered
    as it was at each read of ``span`` at which nothing ran (smoothed with 0), so a backlog that
    stops moving is shed before its oldest job is old.

    >>> pace(20.0, Span(queued=150, seconds=3.0, reads=3))
    2.5
    >>> pace(None, Span(queued=150, seconds=3.0, reads=3)) is None
    True
    """
    if rate is None:
        return None
    return rate * (1 - RATE_WEIGHT) ** span.reads


def capacity(
    previous: float | None, *, queued_before: int, added: int, queued_now: int, seconds: float
) -> float | None:
    """The process's run rate (every account's jobs a second), updated with an interval:
    measured (``run_rate``, so it may fall) only when there was a backlog at both ends of it;
    otherwise the worker was idle for part of it, so what it ran is only a floor: the rate is
    raised to it, never lowered. An idle process keeps the rate it last ran at (an idle
    interval measured 0 before, so after a few idle seconds every account's room fell to
    ``MIN_RATE``'s: 503 to a client sending 500 requests a second whose backlog was
    under a second of work).

    >>> capacity(None, queued_before=0, added=0, queued_now=0, seconds=0.25) is None
    True
    >>> capacity(400.0, queued_before=0, added=0, queued_now=0, seconds=0.25)
    400.0
    >>> capacity(400.0, queued_before=0, added=150, queued_now=0, seconds=0.25)
    600.0
    >>> capacity(400.0, queued_before=100, added=0, queued_now=100, seconds=0.25)
    200.0
    """
    if queued_before > 0 and queued_now > 0:
        return run_rate(
            previous,
            queued_before=queued_before,
            added=added,
            queued_now=queued_now,
            seconds=seconds,
        )
    ran = max(0, queued_before + added - queued_now) / max(seconds, 1e-3)
    if ran > 0 and (previous is None or ran > previous):
        return ran
    return previous


def wait_ms(*, age_ms: int, queued: int, rate: float | None) -> int:
    """How long a job the account adds now would wait: its oldest due job's age, or the time
    its backlog takes at ``rate`` (when measured), whichever is longer."""
    if not rate or rate <= 0:
        return age_ms
    return max(age_ms, int(queued / rate * 1000))


#: Past this many times the requests-first wait, a backlog gets every slot: keeping up (one
#: unit at a time) did not hold it, so more comes in than that pace runs. A closed loop of 64
#: connections on one core: with keeping up until the bound's eighth, the endpoint took 10,226,
#: 4,826, then 2,508 requests a second as the backlog grew to 7.5 s and every slot took over;
#: with this, 7,436, 5,960, 5,180. Not lower: every slot at once holds the endpoints (at 4, a
#: 5,000/s load passed 1 s and its client was sent up to 1 s late, against 40 ms).
FULL_AFTER = 8


class Pace(enum.Enum):
    """How the job worker runs while the endpoints take requests (``engine/queue/jobs.py``)."""

    #: Every slot: nothing to yield to, or a backlog that must be run before it is shed.
    FULL = "full"
    #: Requests first, keeping up: one unit of runs at a time, back to back, so the endpoints
    #: are never held by many commits at once and the runs keep pace with the requests.
    KEEP_UP = "keep_up"
    #: Requests first: one unit at a time with a pause after each (a burst is taken at nearly
    #: full speed and run after it).
    REQUESTS_FIRST = "requests_first"


def worker_pace(*, pressed: bool, wait: int, bound_ms: int, requests_first_ms: int) -> Pace:
    """The job worker's pace, from whether the endpoints are saturated (``pressed``: requests
    share each commit) and how long the longest backlog waits (``wait``, ms). Requests first
    holds while the backlog waits less than ``requests_first_ms``; past it the runs keep up
    (measured, at 5,000 requests a second on one core: all slots at once left the client
    sending up to 0.6 s late, one unit back to back 40 ms, for the same lag); past
    ``FULL_AFTER`` times that wait, or an eighth of the shedding bound ``bound_ms``, every slot
    runs (more comes in than one unit at a time runs; the backlog is run before it is shed). A
    limit of 0 is off.

    >>> worker_pace(pressed=False, wait=9_000, bound_ms=60_000, requests_first_ms=250).name
    'FULL'
    >>> worker_pace(pressed=True, wait=100, bound_ms=60_000, requests_first_ms=250).name
    'REQUESTS_FIRST'
    >>> worker_pace(pressed=True, wait=600, bound_ms=60_000, requests_first_ms=250).name
    'KEEP_UP'
    >>> worker_pace(pressed=True, wait=2_100, bound_ms=60_000, requests_first_ms=250).name
    'FULL'
    >>> worker_pace(pressed=True, wait=8_000, bound_ms=60_000, requests_first_ms=0).name
    'FULL'
    >>> worker_pace(pressed=True, wait=8_000, bound_ms=0, requests_first_ms=0).name
    'REQUESTS_FIRST'
    """
    if not pressed or (bound_ms > 0 and wait > bound_ms // 8):
        return Pace.FULL
    if requests_first_ms > 0 and wait > FULL_AFTER * requests_first_ms:
        return Pace.FULL  # more comes in than one unit at a time runs: all slots
    if requests_first_ms > 0 and wait > requests_first_ms:
        return Pace.KEEP_UP
    return Pace.REQUESTS_FIRST


def room(*, rate: float | None, queued: int, bound_ms: int) -> int:
    """How many more jobs an account may add now: what ``rate`` (jobs a second; None or 0:
    ``MIN_RATE``) runs in ``ROOM_SHARE`` of ``bound_ms``, less its ``queued`` due jobs; 0 when
    there is no room."""
    pace = rate if rate and rate > 0 else MIN_RATE
    return max(0, math.floor(pace * bound_ms * ROOM_SHARE / 1000) - queued)


def shed(waits_ms: Mapping[str, int], *, bound_ms: int) -> dict[str, int]:
    """``{owner: Retry-After seconds}`` for every owner whose backlog's wait (``waits_ms``) is
    longer than ``bound_ms``; a bound of 0 or less sheds no one. The client is asked to wait
    the backlog's wait over the bound, clamped to 1..60 s."""
    if bound_ms <= 0:
        return {}
    return {
        owner: min(MAX_RETRY_S, max(MIN_RETRY_S, math.ceil((wait - bound_ms) / 1000)))
        for owner, wait in waits_ms.items()
        if wait > bound_ms
    }


def disk_low(*, free_bytes: int, reserve_bytes: int) -> bool:
    """Whether new requests are refused: the disk is down to its reserve, kept for the work
    already accepted (its runs' results, their done marks, a checkpoint). A reserve of 0
    refuses nothing (the disk then fills, and the store's own error answers 503)."""
    return reserve_bytes > 0 and free_bytes < reserve_bytes
