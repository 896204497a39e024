"""``/v1/users/me``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice.api.auth import AccountDep

router = APIRouter()


@router.get("/v1/users/me")
async def me(account: AccountDep) -> dict[str, Any]:
    return {"data": account.to_api()}
