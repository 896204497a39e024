"""Live views of a source: its emits and its log lines as they are committed, after a replay
from storage when the reader resumes (SSE ``Last-Event-ID``).

``open_emits``/``open_logs`` subscribe at once, so nothing committed after they return is
missed, and the returned ``Stream`` reads the replay lazily on its first iteration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.engine import broker
from sluice.engine.broker import Broker, Subscription
from sluice.storage import events

#: The spec: the newest 100 events (and log lines) of a source are served.
WINDOW = 100


@dataclass
class Stream:
    """``(id, data)`` pairs: the SSE id and the JSON-ready item. Always ``close()`` it."""

    subscription: Subscription
    replay: Callable[[], Awaitable[Sequence[dict[str, Any]]]]
    key: Callable[[dict[str, Any]], Any]
    #: The reader's resume point (in ``key`` terms): nothing at or before it is sent.
    after: Any = None
    keep: Callable[[dict[str, Any]], bool] = lambda _item: True

    async def items(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        try:
            replayed = await self.replay()
            async for item in broker.follow(self.subscription, replayed, self.key, self.after):
                if self.keep(item):
                    yield str(item["id"]), item
        finally:
            self.close()

    def close(self) -> None:
        self.subscription.close()

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
) -> Stream:
    """Emits of ``emitter_id`` (only ``channel``'s when given) from now on; first, when
    ``after`` is given, the stored ones after it among the newest 100."""
    sub = hub.subscribe(broker.emits_topic(emitter_id))

    async def replay() -> list[dict[str, Any]]:
        if after is None:
            return []
        async with db.connect() as conn:
            page = await events.page(
                conn, emitter_id, limit=WINDOW, window=WINDOW, channel=channel, after=after
            )
        return [e.to_emitted() for e in reversed(page.items)]

    return Stream(
        sub,
        replay,
        key=lambda item: events.position(item["id"]),
        after=after,
        keep=(
            (lambda item: item["name"] == channel)
            if channel is not None
            else (lambda item: item["name"] != events.ERRORS)
        ),
    )


def open_logs(db: AsyncEngine, hub: Broker, emitter_id: str, *, after: int | None) -> Stream:
    """Log lines of ``emitter_id`` from now on; first, when ``after`` is given, the stored ones
    after it among the newest 100."""
    sub = hub.subscribe(broker.logs_topic(emitter_id))

    async def replay() -> list[dict[str, Any]]:
        if after is None:
            return []
        async with db.connect() as conn:
            lines = await events.logs_after(conn, emitter_id, after, window=WINDOW)
        return [line.to_stream() | {"id": line.pk} for line in lines]

    return Stream(sub, replay, key=lambda item: int(item["id"]), after=after)


def publish_committed(
    hub: Broker,
    emitter_id: str,
    stored: Sequence[tuple[str, tuple[str, Any, dict[str, Any]]]],
    logs: Sequence[events.LogLine],
    deliveries: int,
) -> None:
    """What one invocation committed, to the live readers: its events (``(event id,
    (channel, payload, meta))``), its log lines, and the number of deliveries it enqueued."""
    if stored and hub.subscribers(broker.emits_topic(emitter_id)):
        hub.publish(
            broker.emits_topic(emitter_id),
            [events.emitted(event_id, *item) for event_id, item in stored],
        )
    if logs and hub.subscribers(broker.logs_topic(emitter_id)):
        hub.publish(
            broker.logs_topic(emitter_id), [line.to_stream() | {"id": line.pk} for line in logs]
        )
    if deliveries:
        hub.publish(broker.JOBS, [deliveries])
