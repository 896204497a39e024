"""Connected accounts (``$auth`` credentials): list, add with key fields, delete. OAuth
"Connect" is issue 13's; the page keeps a place for its button."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.web import render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


@router.get("/accounts")
async def accounts(request: Request, app: str | None = None) -> Response:
    session = await sessions.required(request)
    found = await sessions.platform_of(request).apps.list(session.account.id)
    context = {"accounts": found, "app": app or "", "rows": [("", "")]}
    return render.page(request, "accounts.html", context, session=session)


@router.post("/accounts")
async def connect(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    app = render.text(form, "app").strip()
    name = render.text(form, "name").strip() or None
    keys, values = form.getlist("field_key"), form.getlist("field_value")
    credentials = {
        str(k).strip(): str(v) for k, v in zip(keys, values, strict=False) if str(k).strip()
    }
    try:
        if not app:
            raise errors.InvalidRequest("name the app, e.g. slack", field="app")
        if not credentials:
            raise errors.InvalidRequest("give at least one credential field", field="credentials")
        await platform.apps.connect(session.account.id, app, name, credentials)
    except errors.SluiceError as exc:
        found = await platform.apps.list(session.account.id)
        rows = [(str(k), "") for k in keys] or [("", "")]
        context = {"accounts": found, "app": app, "name": name, "rows": rows, "error": exc}
        return render.page(request, "accounts.html", context, session=session, status=400)
    return render.redirect("/accounts")


@router.post("/accounts/{account_id}/delete")
async def delete(request: Request, account_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    if not await sessions.platform_of(request).apps.delete(session.account.id, account_id):
        raise errors.NotFound(f"connected account {account_id} not found")
    return render.redirect("/accounts")
