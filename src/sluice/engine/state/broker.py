"""In-process fan-out of what was just committed: a source's stored events and log lines to
live streams (SSE), "jobs were enqueued" to the job worker, and a job's answer to the request
in this process waiting for it (``Waiters``).

The invoker publishes *after* its transaction commits, never before, so a live stream only
ever shows durable events. Publishing never waits: each subscriber has a bounded buffer, and a
subscriber that falls ``maxsize`` items behind is closed (its stream ends once it has sent what
it holds; the client reconnects with ``Last-Event-ID`` and replays the rest from storage).

Only this process's commits are published here; what other processes on one PostgreSQL
stored reaches this broker through LISTEN/NOTIFY (``engine/notifications.py``, the
``stored_topic``).

Waiting requests (``customResponse`` sources, workflow endpoints, manual runs) get one future
per job id. The ingress registers it at the commit of the request's job (before any worker can
claim it); the ``http`` and ``workflow`` handlers settle it with the first ``respond()``, or an
``Ended`` when the run ends without one; only the first outcome counts. Per process: a job run
by another process answers no one here (its request waits for its time-out).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sluice.domain.states import Unanswered
from sluice.runtime.protocol import Response

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How many recent items ``follow`` remembers to drop duplicates.
_SEEN = 4096

#: Topic of "jobs were enqueued" (items: the number of jobs).
JOBS = "jobs"
#: Topic of "deliveries to webhooks were stored" (items: their number).
DELIVERIES = "deliveries"


def emits_topic(emitter_id: str) -> str:
    return f"emits:{emitter_id}"


def logs_topic(emitter_id: str) -> str:
    return f"logs:{emitter_id}"


def stored_topic(emitter_id: str) -> str:
    """Another process stored events or log lines of the emitter (``engine/notifications``)."""
    return f"stored:{emitter_id}"


class Subscription:
    """One live reader of a topic. ``await next_batch()`` returns what arrived since the last
    call, or ``[]`` once closed (by ``close()``, or by falling too far behind)."""

    def __init__(self, broker: Broker, topic: str, maxsize: int) -> None:
        self.broker = broker
        self.topic = topic
        self.maxsize = maxsize
        self.closed = False
        self.overflowed = False
        self._items: deque[Any] = deque()
        self._ready = asyncio.Event()

    def push(self, items: Sequence[Any]) -> None:
        if self.closed:
            return
        if len(self._items) + len(items) > self.maxsize:
            self.overflowed = True
            log.warning(
                "a live reader of %s fell %d items behind; closing it",
                self.topic,
                self.maxsize,
                extra={"action": "stream_overflow", "topic": self.topic},
            )
            self.close()
            return
        self._items.extend(items)
        self._ready.set()

    async def next_batch(self) -> list[Any]:
        while not self._items:
            if self.closed:
                return []
            self._ready.clear()
            await self._ready.wait()
        batch = list(self._items)
        self._items.clear()
        return batch

    def close(self) -> None:
        """Stop receiving (idempotent); a waiting ``next_batch`` returns what is left."""
        if not self.closed:
            self.closed = True
            self.broker._discard(self)
            self._ready.set()


#: What a publication to a topic calls, with its items; it must not block.
Callback = Callable[[Sequence[Any]], None]


class Broker:
    """Live readers subscribe and unsubscribe as they come; the process's own loops are told
    through ``callbacks``, given once: ``{topic: [callback(items), ...]}``."""

    def __init__(
        self, maxsize: int = 1000, *, callbacks: Mapping[str, Sequence[Callback]] | None = None
    ) -> None:
        self.maxsize = maxsize
        self._subscribers: dict[str, set[Subscription]] = {}
        self._callbacks = {topic: tuple(calls) for topic, calls in (callbacks or {}).items()}

    def subscribe(self, topic: str) -> Subscription:
        sub = Subscription(self, topic, self.maxsize)
        self._subscribers.setdefault(topic, set()).add(sub)
        return sub

    def publish(self, topic: str, items: Sequence[Any]) -> None:
        if not items:
            return
        for sub in list(self._subscribers.get(topic, ())):
            sub.push(items)
        for callback in self._callbacks.get(topic, ()):
            callback(items)

    def subscribers(self, topic: str) -> int:
        return len(self._subscribers.get(topic, ()))

    def _discard(self, sub: Subscription) -> None:
        subs = self._subscribers.get(sub.topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subscribers[sub.topic]


async def follow(
    sub: Subscription, replay: Sequence[T], key: Callable[[T], Any], after: Any = None
) -> AsyncIterator[T]:
    """``replay`` (read from storage *after* ``sub`` was opened: the items after ``after``),
    then the live items, with no gap and no duplicate: a live item at or before the last
    replayed one (by ``key``; or ``after`` when nothing was replayed) was committed in time
    for the replay read (or was already seen by the reader) and is skipped.

    Live items are passed on in the order they were published, which is commit order; an
    item passed on already (published live and found again by a poll of storage) is
    skipped."""
    last: Any = after
    for item in replay:
        last = key(item)
        yield item
    seen: deque[Any] = deque()
    seen_set: set[Any] = set()
    while batch := await sub.next_batch():
        for item in batch:
            position = key(item)
            if (last is not None and position <= last) or position in seen_set:
                continue
            # The same item may come twice: published live and found by a poll of storage.
            seen.append(position)
            seen_set.add(position)
            if len(seen) > _SEEN:
                seen_set.discard(seen.popleft())
            yield item


@dataclass(frozen=True)
class Ended:
    """The run ended, or could not start, without calling ``respond()``: why (its HTTP status
    is decided in ``api/errors.py``) and a message for the client."""

    message: str
    reason: Unanswered = Unanswered.NO_RESPONSE


#: What settles a waiting client's request: the run's ``respond()``, or why it ended without one.
Settlement = Response | Ended


class Waiters:
    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[Settlement]] = {}

    def add(self, job_id: int, future: asyncio.Future[Settlement]) -> None:
        self._futures[job_id] = future

    def discard(self, job_id: int) -> None:
        self._futures.pop(job_id, None)

    def settle(self, job_id: int, outcome: Settlement) -> None:
        """The first outcome answers the waiting request, if any (only the first counts)."""
        future = self._futures.get(job_id)
        if future is not None and not future.done():
            future.set_result(outcome)
