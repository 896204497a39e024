"""``/v1/actions/run``: run one action with configured props (Pipedream Connect's call)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.components import component_input
from sluice.api.schemas import ActionRun
from sluice.platform import DeployRequest

router = APIRouter()


@router.post("/v1/actions/run")
async def run(body: ActionRun, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    component = await platform.sources.resolve_component(
        account.id,
        DeployRequest(
            component_id=body.component_id,
            component_key=body.component_key,
            source=component_input(body),
        ),
    )
    result = await platform.actions.run(
        component, body.configured_props, body.steps, owner_id=account.id
    )
    return {"data": render.action_run(result)}
