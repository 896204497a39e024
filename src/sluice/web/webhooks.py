"""Webhooks: the URLs subscriptions POST events to, and their deliveries. A webhook's page
lists the dead ones (every retry failed) with a Retry button each, and Retry all; the
same platform calls as ``/v1/webhooks`` (docs/ui.md, "Webhooks")."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.web import render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)

#: Dead and pending deliveries shown on a webhook's page, newest first.
SHOWN = 100


async def _list(request: Request, session: sessions.Session, **extra: Any) -> Response:
    webhooks = sessions.platform_of(request).webhooks
    hooks = await webhooks.list(session.account.id)
    counts = await webhooks.counts(session.account.id)
    rows = [
        {
            "hook": hook,
            "pending": counts.get((hook.id, "pending"), 0),
            "dead": counts.get((hook.id, "dead"), 0),
        }
        for hook in hooks
    ]
    status = 400 if extra.get("error") else 200
    context = {"rows": rows, **extra, **render.page_address(request, "/webhooks")}
    return render.page(request, "webhooks.html", context, session=session, status=status)


@router.get("/webhooks")
async def webhooks(request: Request) -> Response:
    return await _list(request, await sessions.required(request))


@router.post("/webhooks")
async def create(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    url, name = render.text(form, "url").strip(), render.text(form, "name").strip() or None
    try:
        hook = await sessions.platform_of(request).webhooks.create(
            session.account.id, url, name, None
        )
    except errors.SluiceError as exc:
        return await _list(request, session, error=exc, url=url, name=name)
    return render.redirect(f"/webhooks/{hook.id}")


@router.get("/webhooks/{webhook_id}")
async def webhook(request: Request, webhook_id: str) -> Response:
    session = await sessions.required(request)
    webhooks = sessions.platform_of(request).webhooks
    hook = await webhooks.get(session.account.id, webhook_id)
    if hook is None:
        raise errors.NotFound(f"webhook {webhook_id} not found")
    owner = session.account.id
    dead = await webhooks.deliveries(owner, webhook_id, status="dead", limit=SHOWN)
    pending = await webhooks.deliveries(owner, webhook_id, status="pending", limit=SHOWN)
    context = {"hook": hook, "dead": dead, "pending": pending}
    return render.page(request, "webhook.html", context, session=session)


@router.post("/webhooks/{webhook_id}/retry")
async def retry_all(request: Request, webhook_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).webhooks.retry(session.account.id, webhook_id)
    return render.redirect(f"/webhooks/{webhook_id}")


@router.post("/webhooks/{webhook_id}/deliveries/{delivery_id}/retry")
async def retry(request: Request, webhook_id: str, delivery_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    webhooks = sessions.platform_of(request).webhooks
    # Retried meanwhile (another tab, the CLI): a Conflict; the page shows where it is now.
    with contextlib.suppress(errors.Conflict):
        await webhooks.retry(session.account.id, webhook_id, [delivery_id])
    return render.redirect(f"/webhooks/{webhook_id}")


@router.post("/webhooks/{webhook_id}/delete")
async def delete(request: Request, webhook_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).webhooks.delete(session.account.id, webhook_id)
    return render.redirect("/webhooks")
