"""``/v1/subscriptions``: a workflow or source listening to another's channel or errors.

As in Pipedream, every parameter is in the query string and no body is sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from sluice import errors
from sluice.api import render, workspaces
from sluice.api.auth import AccountDep, PlatformDep
from sluice.domain import text
from sluice.domain.routing import Link

router = APIRouter()

EmitterId = Annotated[
    str,
    Query(
        description="The source (dc_…) or workflow (p_…) whose events are forwarded; dc_* or "
        "p_* for all of them."
    ),
]
ListenerId = Annotated[
    str, Query(description="The workflow (p_…) or source (dc_…) that receives them.")
]
EventName = Annotated[
    str,
    Query(description="The channel ($errors: a workflow's errors); empty: the default one."),
]


@router.post("/v1/subscriptions")
async def create(
    account: AccountDep,
    platform: PlatformDep,
    emitter_id: EmitterId,
    listener_id: ListenerId,
    event_name: EventName = "",
) -> dict[str, Any]:
    text.check_name(event_name, "event_name", 300)  # a channel is a name, stored as one
    found = await platform.subscriptions.create(
        account.id,
        Link(emitter_id, listener_id, event_name),
        now_s=platform.clock.now_ms() // 1000,
    )
    return {"data": render.subscription(found)}


@router.delete("/v1/subscriptions")
async def delete(
    account: AccountDep,
    platform: PlatformDep,
    emitter_id: EmitterId,
    listener_id: ListenerId,
    event_name: EventName = "",
) -> dict[str, Any]:
    await platform.subscriptions.delete(account.id, Link(emitter_id, listener_id, event_name))
    return {}


@router.get("/v1/users/me/subscriptions")
async def list_mine(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.subscriptions.list_for(account.id)
    return {"data": [render.subscription(s) for s in found]}


@router.get("/v1/workspaces/{workspace_id}/subscriptions")
async def list_workspace(
    workspace_id: str, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    """Pipedream's workspace listing: a Sluice account is its own workspace (its id, the
    ``orgs`` entry of ``GET /v1/users/me``)."""
    workspaces.check(account, workspace_id)
    found = await platform.subscriptions.list_for(account.id)
    return {"data": [render.subscription(s) for s in found]}


@router.post("/v1/auto_subscriptions")
async def create_auto(
    account: AccountDep,
    platform: PlatformDep,
    listener_id: Annotated[str, Query(description="The workflow or source that listens.")],
    event_name: Annotated[str, Query(description="$errors.")],
) -> dict[str, Any]:
    """Every workflow created from now on is subscribed to ``listener_id`` for its
    ``event_name`` (``$errors``); not retroactive, as in Pipedream."""
    found = await platform.subscriptions.create_auto(
        account.id, listener_id, event_name, now_s=platform.clock.now_ms() // 1000
    )
    return {"data": render.auto_subscription(found)}


@router.get("/v1/users/me/auto_subscriptions")
async def list_auto(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.subscriptions.list_auto(account.id)
    return {"data": [render.auto_subscription(a) for a in found]}


@router.delete("/v1/auto_subscriptions")
async def delete_auto(
    account: AccountDep,
    platform: PlatformDep,
    listener_id: Annotated[str, Query()],
    event_name: Annotated[str, Query()],
) -> dict[str, Any]:
    if not await platform.subscriptions.delete_auto(account.id, listener_id, event_name):
        raise errors.NotFound(f"no auto-subscription of {listener_id} for {event_name}")
    return {}
