"""``POST /v1/components/{id}/props/{prop}/options``: a prop's options while configuring it.

What a deploy prompt shows: static options as they are, or the prop's async ``options()``
run with the values configured so far (Pipedream Connect's configure call, by component).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from sluice import ids
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.platform import DeployRequest, OptionsRequest

router = APIRouter()


class OptionsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    configured_props: dict[str, Any] = Field(
        default_factory=dict,
        description="The values configured so far (any subset); app props as "
        '{"authProvisionId": "apn_..."}.',
    )
    page: int = Field(0, ge=0, description="0-indexed page, passed to options({page}).")
    prev_context: Any = Field(
        None, description="The context the previous page returned (options({prevContext}))."
    )
    query: str | None = Field(None, description="Search text, for props with useQuery.")


@router.post("/v1/components/{component}/props/{prop}/options")
async def list_options(
    component: str,
    prop: str,
    account: AccountDep,
    platform: PlatformDep,
    body: OptionsBody | None = None,
) -> dict[str, Any]:
    """``{"data": {"options": [...], "context": ...}}``; ``component`` is an ``sc_`` id or a
    key (the account's newest, else the public registry's)."""
    body = body or OptionsBody()
    by_id = ids.has_prefix(component, "sc")
    saved = await platform.sources.resolve_component(
        account.id,
        DeployRequest(
            component_id=component if by_id else None,
            component_key=None if by_id else component,
        ),
    )
    page = await platform.options.list(
        account.id,
        saved,
        OptionsRequest(
            prop=prop,
            configured_props=body.configured_props,
            page=body.page,
            prev_context=body.prev_context,
            query=body.query,
        ),
    )
    return {"data": render.options_page(page)}
