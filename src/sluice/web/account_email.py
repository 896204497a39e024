"""Settings → e-mail address: change it, send the verification link, see whether it is
verified (``$.send.email`` sends only to a verified address; docs/ui.md). The same operations
as ``PUT /v1/users/me`` and ``POST /v1/users/me/email/verification``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.web import render
from sluice.web import session as sessions
from sluice.web.workflows import settings_page

router = APIRouter(include_in_schema=False)


@router.post("/settings/email")
async def set_email(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    email = render.text(form, "email").strip() or None
    try:
        await sessions.platform_of(request).set_email(session.account.id, email)
    except errors.SluiceError as exc:
        return await settings_page(request, session, email_error=exc, email_value=email)
    return render.redirect("/settings")


@router.post("/settings/email/verification")
async def send_verification(request: Request) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    try:
        sent_to = await platform.email_verification.request(
            session.account, platform.settings.resolved_public_url
        )
    except errors.SluiceError as exc:
        return await settings_page(request, session, email_error=exc)
    return await settings_page(request, session, email_sent_to=sent_to)
