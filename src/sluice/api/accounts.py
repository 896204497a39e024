"""``/v1/accounts``: connected accounts whose credentials app props read as ``$auth``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice import errors
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import ConnectedAccountCreate
from sluice.storage import apps

router = APIRouter()


@router.post("/v1/accounts")
async def create(
    body: ConnectedAccountCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    async with platform.db.begin() as conn:
        created = await apps.create(
            conn,
            platform.cipher,
            owner_id=account.id,
            app=body.app,
            name=body.name,
            credentials=body.credentials,
            now_s=platform.clock.now_ms() // 1000,
        )
    return {"data": created.to_api()}


@router.get("/v1/accounts")
async def list_accounts(
    account: AccountDep, platform: PlatformDep, app: str | None = None
) -> dict[str, Any]:
    async with platform.db.connect() as conn:
        found = await apps.list_for(conn, platform.cipher, account.id, app)
    return {"data": [a.to_api() for a in found]}


@router.get("/v1/accounts/{account_id}")
async def read(account_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    async with platform.db.connect() as conn:
        found = await apps.get(conn, platform.cipher, account.id, account_id)
    if found is None:
        raise errors.NotFound(f"connected account {account_id} not found")
    return {"data": found.to_api()}


@router.delete("/v1/accounts/{account_id}")
async def delete(account_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    async with platform.db.begin() as conn:
        if not await apps.delete(conn, account.id, account_id):
            raise errors.NotFound(f"connected account {account_id} not found")
    return {}
