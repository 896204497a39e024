"""``/v1/subscriptions``: a source listening to another source's channel.

As in Pipedream, every parameter is in the query string and no body is sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from sluice.api.auth import AccountDep, PlatformDep
from sluice.domain.routing import Link
from sluice.engine import subscriptions

router = APIRouter()

EmitterId = Annotated[
    str, Query(description="The source whose events are forwarded (dc_…), or dc_* for all.")
]
ListenerId = Annotated[str, Query(description="The source whose run(event) receives them.")]
EventName = Annotated[str, Query(description="The channel; empty or absent: the default one.")]


@router.post("/v1/subscriptions")
async def create(
    account: AccountDep,
    platform: PlatformDep,
    emitter_id: EmitterId,
    listener_id: ListenerId,
    event_name: EventName = "",
) -> dict[str, Any]:
    found = await subscriptions.create(
        platform.db,
        account.id,
        Link(emitter_id, listener_id, event_name),
        now_s=platform.clock.now_ms() // 1000,
    )
    return {"data": found.to_api()}


@router.delete("/v1/subscriptions")
async def delete(
    account: AccountDep,
    platform: PlatformDep,
    emitter_id: EmitterId,
    listener_id: ListenerId,
    event_name: EventName = "",
) -> dict[str, Any]:
    await subscriptions.delete(platform.db, account.id, Link(emitter_id, listener_id, event_name))
    return {}


@router.get("/v1/users/me/subscriptions")
async def list_mine(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await subscriptions.list_for(platform.db, account.id)
    return {"data": [s.to_api() for s in found]}
