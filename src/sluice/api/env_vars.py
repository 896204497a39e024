"""``/v1/env_vars``: the account's environment variables, the ``process.env`` of its workflows'
code steps. Values are write-only: listed by name, never shown again. docs/api.md,
"Environment variables"."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import EnvVarValue

router = APIRouter()


@router.get("/v1/users/me/env_vars")
async def list_mine(account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.workflows.env_vars.names(account.id)
    return {"data": [{"name": name, "updated_at": at} for name, at in found]}


@router.put("/v1/env_vars/{name}")
async def put(
    name: str, body: EnvVarValue, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    updated_at = await platform.workflows.env_vars.set(account.id, name, body.value)
    return {"data": {"name": name, "updated_at": updated_at}}


@router.delete("/v1/env_vars/{name}")
async def delete(name: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    await platform.workflows.env_vars.delete(account.id, name)
    return {}
