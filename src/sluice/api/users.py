"""``/v1/users/me``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice.api import render, workspaces
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import UserUpdate

router = APIRouter()


@router.get("/v1/users/me")
async def me(account: AccountDep) -> dict[str, Any]:
    """The account, with ``orgs``: itself, its own workspace (``api/workspaces.py``)."""
    return {"data": {**render.account(account), "orgs": workspaces.orgs(account)}}


@router.put("/v1/users/me")
async def update_me(body: UserUpdate, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """Change the account's e-mail address (where ``$.send.email`` and the default global error
    workflow's messages go); ``null`` removes it."""
    email = body.email.strip() if body.email is not None else None
    found = await platform.set_email(account.id, email)
    return {"data": render.account(found)}
