"""``/v1/accounts``: connected accounts whose credentials app props read as ``$auth``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import ConnectedAccountCreate

router = APIRouter()


@router.post("/v1/accounts")
async def create(
    body: ConnectedAccountCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    created = await platform.apps.connect(account.id, body.app, body.name, body.credentials)
    return {"data": render.connected_account(created)}


@router.get("/v1/accounts")
async def list_accounts(
    account: AccountDep, platform: PlatformDep, app: str | None = None
) -> dict[str, Any]:
    found = await platform.apps.list(account.id, app)
    return {"data": [render.connected_account(a) for a in found]}


@router.get("/v1/accounts/{account_id}")
async def read(account_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.apps.get(account.id, account_id)
    if found is None:
        raise errors.NotFound(f"connected account {account_id} not found")
    return {"data": render.connected_account(found)}


@router.delete("/v1/accounts/{account_id}")
async def delete(account_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    if not await platform.apps.delete(account.id, account_id):
        raise errors.NotFound(f"connected account {account_id} not found")
    return {}
