"""``/v1/webhooks``: URLs that subscriptions deliver events to (``listener_id=wh_…``), as
Pipedream's. docs/api.md, "Webhooks"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from sluice.api.auth import AccountDep, PlatformDep
from sluice.platform import Webhook

router = APIRouter()


def _webhook(hook: Webhook, *, with_user: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"id": hook.id}
    if with_user:
        out["user_id"] = hook.owner_id
    return out | {
        "name": hook.name,
        "description": hook.description,
        "url": hook.url,
        "active": hook.active,
        "created_at": hook.created_at,
        "updated_at": hook.updated_at,
    }


@router.post("/v1/webhooks")
async def create(
    url: Annotated[str, Query(description="Where events are POSTed (http or https).")],
    account: AccountDep,
    platform: PlatformDep,
    name: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    hook = await platform.webhooks.create(account.id, url, name, description)
    return {"data": _webhook(hook)}


@router.get("/v1/users/me/webhooks")
async def list_mine(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    hooks = await platform.webhooks.list(account.id)
    items = [_webhook(h, with_user=False) for h in hooks]
    page = {"total_count": len(items), "count": len(items), "start_cursor": None}
    return {"data": items, "page_info": page | {"end_cursor": None}}


@router.delete("/v1/webhooks/{webhook_id}")
async def delete(webhook_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    await platform.webhooks.delete(account.id, webhook_id)
    return {}
