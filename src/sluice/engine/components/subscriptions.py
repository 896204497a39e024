"""Subscribing a listener (source or workflow) to an emitter's channel
(``POST/DELETE /v1/subscriptions``, ``POST /v1/auto_subscriptions``).

The rules a link must follow are ``domain/routing.py``'s; here both ends are looked up in the
account (404 naming the parameter otherwise) and the link is stored once.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors
from sluice.domain import routing, states
from sluice.domain.routing import AutoSubscription, Link, Subscription
from sluice.storage import sources, subscriptions, webhooks, workflows


async def _must_exist(conn: AsyncConnection, owner_id: str, field: str, value: str) -> None:
    if value in (routing.SOURCES_GLOB, routing.WORKFLOWS_GLOB):
        return
    if value.startswith("p_"):
        if await workflows.get(conn, owner_id, value) is None:
            raise errors.NotFound(f"{field}: workflow {value} not found", field=field)
    elif value.startswith("wh_"):
        if await webhooks.get(conn, owner_id, value) is None:
            raise errors.NotFound(f"{field}: webhook {value} not found", field=field)
    elif await sources.get(conn, owner_id, value) is None:
        raise errors.NotFound(f"{field}: source {value} not found", field=field)


async def auto_subscribe(conn: AsyncConnection, owner_id: str, emitter_id: str, now_s: int) -> None:
    """``POST /v1/auto_subscriptions``: a new workflow or source is subscribed to by the
    listeners waiting for new ones (never by itself)."""
    for listener_id, event_name in await subscriptions.auto_for(conn, owner_id):
        if listener_id != emitter_id:
            link = Link(emitter_id, listener_id, event_name)
            await subscriptions.create(conn, owner_id, link, now_s=now_s)


class Subscriptions:
    def __init__(self, db: AsyncEngine) -> None:
        self.db = db

    async def create_auto(
        self, owner_id: str, listener_id: str, event_name: str, *, now_s: int
    ) -> AutoSubscription:
        """Subscribe ``listener_id`` to ``event_name`` of every workflow and source created
        from now on."""
        routing.check_link(routing.WORKFLOWS_GLOB, listener_id, event_name)
        if event_name not in (states.ERRORS, states.LOGS):
            raise errors.InvalidRequest(
                "event_name must be $errors or $logs: new workflows and sources are subscribed "
                "for their errors or their logs",
                field="event_name",
            )
        async with self.db.begin() as conn:
            await _must_exist(conn, owner_id, "listener_id", listener_id)
            return await subscriptions.create_auto(
                conn, owner_id, listener_id, event_name, now_s=now_s
            )

    async def list_auto(self, owner_id: str) -> list[AutoSubscription]:
        async with self.db.connect() as conn:
            return await subscriptions.list_auto(conn, owner_id)

    async def delete_auto(self, owner_id: str, listener_id: str, event_name: str) -> bool:
        """Whether there was one to delete."""
        async with self.db.begin() as conn:
            return await subscriptions.delete_auto(conn, owner_id, listener_id, event_name)

    async def create(self, owner_id: str, link: Link, *, now_s: int) -> Subscription:
        """Subscribe ``link.listener_id`` to ``link.emitter_id``'s ``link.event_name`` channel;
        the existing subscription when there is one."""
        routing.check_link(link.emitter_id, link.listener_id, link.event_name)
        async with self.db.begin() as conn:
            await _must_exist(conn, owner_id, "emitter_id", link.emitter_id)
            await _must_exist(conn, owner_id, "listener_id", link.listener_id)
            return await subscriptions.create(conn, owner_id, link, now_s=now_s)

    async def delete(self, owner_id: str, link: Link) -> None:
        async with self.db.begin() as conn:
            if not await subscriptions.delete(conn, owner_id, link):
                raise errors.NotFound(
                    f"no subscription of {link.listener_id} to {link.emitter_id} on "
                    + (f"channel {link.event_name!r}" if link.event_name else "the default channel")
                )

    async def list_for(self, owner_id: str) -> list[Subscription]:
        async with self.db.connect() as conn:
            return await subscriptions.list_for(conn, owner_id)
