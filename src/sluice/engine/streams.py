"""Live views of a source: its emits and its log lines as they are committed, after a replay
from storage when the reader resumes (SSE ``Last-Event-ID``).

``open_emits``/``open_logs`` subscribe at once, so nothing committed after they return is
missed, and the returned ``Stream`` reads the replay lazily on its first iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.domain import states
from sluice.domain.events import Event, LogLine
from sluice.engine.state import broker
from sluice.engine.state.broker import Broker, Subscription
from sluice.storage import events

log = logging.getLogger(__name__)

#: A poll from the very start (the emitter had no event when the stream opened).
_BEGINNING = object()

#: The spec: the newest 100 events (and log lines) of a source are served.
WINDOW = 100


@dataclass
class Stream:
    """``(id, item)`` pairs: the SSE id and the value (an ``Event`` or a ``LogLine``: the API
    draws its wire shape). Always ``close()`` it."""

    subscription: Subscription
    replay: Callable[[], Awaitable[Sequence[Any]]]
    key: Callable[[Any], Any]
    #: The item's SSE id.
    ident: Callable[[Any], str]
    #: The reader's resume point (in ``key`` terms): nothing at or before it is sent.
    after: Any = None
    keep: Callable[[Any], bool] = lambda _item: True
    #: Items stored by *other* processes: ``poll(position)`` reads those after a position
    #: (``None``: the newest one only), every ``poll_seconds``; 0 turns polling off.
    poll: Callable[[Any], Awaitable[Sequence[Any]]] | None = None
    poll_seconds: float = 0.0
    #: Wakes the poll at once: another process stored items of the emitter (PostgreSQL's
    #: notifications, ``engine/notifications.py``); ``poll_seconds`` is then the fallback.
    wake: Subscription | None = None
    _poller: asyncio.Task[None] | None = None

    async def items(self) -> AsyncIterator[tuple[str, Any]]:
        try:
            replayed = await self.replay()
            if self.poll is not None and self.poll_seconds > 0:
                start = self.key(replayed[-1]) if replayed else self.after
                if start is None:
                    newest = await self.poll(None)
                    start = self.key(newest[-1]) if newest else None
                self._poller = asyncio.create_task(self._poll(start))
            async for item in broker.follow(self.subscription, replayed, self.key, self.after):
                if self.keep(item):
                    yield self.ident(item), item
        finally:
            self.close()

    async def _poll(self, position: Any) -> None:
        assert self.poll is not None
        while not self.subscription.closed:
            await self._wait()
            try:
                found = await self.poll(position if position is not None else _BEGINNING)
            except Exception:  # the database is away for a moment: try again next time
                log.warning("a live stream could not read storage", exc_info=True)
                continue
            if found:
                position = self.key(found[-1])
                self.subscription.push(found)

    async def _wait(self) -> None:
        """Until the next poll: ``poll_seconds``, or less when woken."""
        if self.wake is None or self.wake.closed:
            await asyncio.sleep(self.poll_seconds)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll_seconds):
                await self.wake.next_batch()

    def close(self) -> None:
        self.subscription.close()
        if self.wake is not None:
            self.wake.close()
        if self._poller is not None:
            self._poller.cancel()

    @property
    def overflowed(self) -> bool:
        return self.subscription.overflowed


def open_emits(
    db: AsyncEngine,
    hub: Broker,
    emitter_id: str,
    *,
    after: tuple[int, int] | None,
    channel: str | None,
    poll_seconds: float = 0.0,
) -> Stream:
    """Emits of ``emitter_id`` (only ``channel``'s when given) from now on; first, when
    ``after`` is given, the stored ones after it among the newest 100. ``poll_seconds``: also
    read storage that often, for events other processes stored."""
    sub = hub.subscribe(broker.emits_topic(emitter_id))

    async def poll(position: Any) -> list[Event]:
        async with db.connect() as conn:
            if position is None:
                page = await events.page(conn, emitter_id, limit=1, window=1, channel=channel)
            else:
                page = await events.page(
                    conn,
                    emitter_id,
                    limit=WINDOW,
                    window=WINDOW,
                    channel=channel,
                    after=None if position is _BEGINNING else position,
                )
        return list(reversed(page.items))

    async def replay() -> list[Event]:
        if after is None:
            return []
        async with db.connect() as conn:
            page = await events.page(
                conn, emitter_id, limit=WINDOW, window=WINDOW, channel=channel, after=after
            )
        return list(reversed(page.items))

    return Stream(
        sub,
        replay,
        key=lambda event: event.position,
        ident=lambda event: str(event.id),
        after=after,
        keep=(
            (lambda event: event.channel == channel)
            if channel is not None
            else (lambda event: event.channel not in states.UNLISTED)
        ),
        poll=poll,
        poll_seconds=poll_seconds,
        wake=hub.subscribe(broker.stored_topic(emitter_id)) if poll_seconds > 0 else None,
    )


def open_logs(
    db: AsyncEngine, hub: Broker, emitter_id: str, *, after: int | None, poll_seconds: float = 0.0
) -> Stream:
    """Log lines of ``emitter_id`` from now on; first, when ``after`` is given, the stored ones
    after it among the newest 100 (``poll_seconds`` as for ``open_emits``)."""
    sub = hub.subscribe(broker.logs_topic(emitter_id))

    async def poll(position: Any) -> list[LogLine]:
        start, window = (0, 1) if position is None else (0, WINDOW)
        if isinstance(position, int):
            start = position
        async with db.connect() as conn:
            return await events.logs_after(conn, emitter_id, start, window=window)

    async def replay() -> list[LogLine]:
        if after is None:
            return []
        async with db.connect() as conn:
            return await events.logs_after(conn, emitter_id, after, window=WINDOW)

    return Stream(
        sub,
        replay,
        key=lambda line: int(line.pk),
        ident=lambda line: str(line.pk),
        after=after,
        poll=poll,
        poll_seconds=poll_seconds,
        wake=hub.subscribe(broker.stored_topic(emitter_id)) if poll_seconds > 0 else None,
    )
