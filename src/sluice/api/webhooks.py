"""``/v1/webhooks``: URLs that subscriptions deliver events to (``listener_id=wh_…``), as
Pipedream's, and their deliveries (pending, delivered, dead) with retry. docs/api.md,
"Webhooks"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from sluice.api.auth import AccountDep, PlatformDep
from sluice.platform import Delivery, Webhook

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


def _delivery(delivery: Delivery) -> dict[str, Any]:
    payload: dict[str, Any] = delivery.payload or {}
    pending = delivery.status == "pending"
    return {
        "id": delivery.id,
        "webhook_id": delivery.webhook_id,
        "event_id": payload.get("event_id"),
        "emitter_id": payload.get("emitter_id"),
        "channel": payload.get("channel") or "",
        "status": delivery.status,
        "attempts": delivery.attempts,
        "last_status": delivery.last_status,
        "last_error": delivery.last_error,
        "created_at": delivery.created_ms // 1000,
        "next_attempt_at": delivery.next_ms // 1000 if pending else None,
        "finished_at": delivery.finished_ms // 1000 if delivery.finished_ms else None,
    }


@router.get("/v1/webhooks/{webhook_id}/deliveries")
async def deliveries(
    webhook_id: str,
    account: AccountDep,
    platform: PlatformDep,
    status: Annotated[
        str | None, Query(description="pending, delivered or dead; all when left out.")
    ] = None,
    limit: Annotated[int, Query(description="At most this many (1 to 100).")] = 100,
    after: Annotated[
        str | None,
        Query(description="The next page: the deliveries after (older than) this end_cursor."),
    ] = None,
) -> dict[str, Any]:
    """The webhook's deliveries, newest first: pending (due or in flight), dead (every retry
    failed), delivered (kept ``SLUICE_DELIVERY_RETENTION_SECONDS``)."""
    found = await platform.webhooks.deliveries(
        account.id, webhook_id, status=status, limit=limit, before=after
    )
    items = [_delivery(d) for d in found]
    page = {"count": len(items), "start_cursor": items[0]["id"] if items else None}
    return {"data": items, "page_info": page | {"end_cursor": items[-1]["id"] if items else None}}


@router.post("/v1/webhooks/{webhook_id}/deliveries/retry")
async def retry_all(webhook_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """Every dead delivery of the webhook pending again, due now (the same ids)."""
    retried = await platform.webhooks.retry(account.id, webhook_id)
    return {"data": {"retried": retried, "count": len(retried)}}


@router.post("/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry")
async def retry(
    webhook_id: str, delivery_id: str, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    """One dead delivery pending again, due now (the same id: the same Idempotency-Key)."""
    retried = await platform.webhooks.retry(account.id, webhook_id, [delivery_id])
    return {"data": {"retried": retried, "count": len(retried)}}
