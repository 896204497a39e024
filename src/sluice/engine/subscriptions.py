"""Subscribing a source to another's channel (``POST/DELETE /v1/subscriptions``).

The rules a link must follow are ``domain/routing.py``'s; here both ends are looked up in the
account (404 naming the parameter otherwise) and the link is stored once.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors
from sluice.domain import routing
from sluice.domain.routing import Link
from sluice.storage import sources, subscriptions
from sluice.storage.subscriptions import Subscription


async def _must_exist(conn: AsyncConnection, owner_id: str, field: str, value: str) -> None:
    if value == routing.SOURCES_GLOB:
        return
    if await sources.get(conn, owner_id, value) is None:
        raise errors.NotFound(f"{field}: source {value} not found", field=field)


async def create(db: AsyncEngine, owner_id: str, link: Link, *, now_s: int) -> Subscription:
    """Subscribe ``link.listener_id`` to ``link.emitter_id``'s ``link.event_name`` channel;
    the existing subscription when there is one."""
    routing.check_link(link.emitter_id, link.listener_id, link.event_name)
    async with db.begin() as conn:
        await _must_exist(conn, owner_id, "emitter_id", link.emitter_id)
        await _must_exist(conn, owner_id, "listener_id", link.listener_id)
        return await subscriptions.create(conn, owner_id, link, now_s=now_s)


async def delete(db: AsyncEngine, owner_id: str, link: Link) -> None:
    async with db.begin() as conn:
        if not await subscriptions.delete(conn, owner_id, link):
            raise errors.NotFound(
                f"no subscription of {link.listener_id} to {link.emitter_id} on "
                + (f"channel {link.event_name!r}" if link.event_name else "the default channel")
            )


async def list_for(db: AsyncEngine, owner_id: str) -> list[Subscription]:
    async with db.connect() as conn:
        return await subscriptions.list_for(conn, owner_id)
