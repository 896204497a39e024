"""The events and log lines an emitter (a source, a workflow) has stored: a page of its newest
events, deleting a range of them, its newest log lines. What the API's event lists read."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.domain.events import Event, LogLine
from sluice.domain.paging import Page
from sluice.storage import events


class Events:
    def __init__(self, db: AsyncEngine) -> None:
        self.db = db

    async def page(
        self,
        emitter_id: str,
        *,
        channel: str | None,
        limit: int,
        window: int,
        before: tuple[int, int] | None,
        after: tuple[int, int] | None,
    ) -> Page[Event]:
        """Newest first, within the newest ``window`` events (one channel's when given)."""
        async with self.db.connect() as conn:
            return await events.page(
                conn,
                emitter_id,
                limit=limit,
                window=window,
                channel=channel,
                before=before,
                after=after,
            )

    async def delete_range(
        self,
        emitter_id: str,
        *,
        start: tuple[int, int] | None,
        end: tuple[int, int] | None,
        channel: str | None,
    ) -> None:
        """Delete from ``start`` to ``end``, both inclusive, either open (none: all)."""
        async with self.db.begin() as conn:
            await events.delete_range(conn, emitter_id, start=start, end=end, channel=channel)

    async def recent_logs(self, emitter_id: str, limit: int) -> list[LogLine]:
        async with self.db.connect() as conn:
            return await events.recent_logs(conn, emitter_id, limit)
