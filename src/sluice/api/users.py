"""``/v1/users/me``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice.api import render, workspaces
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import UserUpdate

router = APIRouter()


@router.get("/v1/users/me")
async def me(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """The account, with ``orgs``: itself, its own workspace (``api/workspaces.py``), and
    ``quotas``: what it uses of them, bytes (a quota of 0 is none)."""
    usage = await platform.usage(account.id)
    data = {**render.account(account), "orgs": workspaces.orgs(account), "quotas": usage}
    return {"data": data}


@router.put("/v1/users/me")
async def update_me(body: UserUpdate, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """Change the account's e-mail address (where ``$.send.email`` and the default global error
    workflow's messages go); ``null`` removes it."""
    email = body.email.strip() if body.email is not None else None
    found = await platform.set_email(account.id, email)
    return {"data": render.account(found)}


@router.post("/v1/users/me/email/verification", status_code=202)
async def request_email_verification(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """Mail a link to the account's address; following it lets ``$.send.email`` send there."""
    sent_to = await platform.email_verification.request(
        account, platform.settings.resolved_public_url
    )
    return {"data": {"sent_to": sent_to}}


@router.get("/v1/email/verify")
async def verify_email(token: str, platform: PlatformDep) -> dict[str, Any]:
    """The link of a verification e-mail (no API key: the token is the proof)."""
    found = await platform.email_verification.confirm(token)
    return {"data": render.account(found)}
