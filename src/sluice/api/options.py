"""Configuring props: what a deploy prompt or form asks while the user answers.

``POST /v1/components/{id}/props/{prop}/options``: a prop's options, static ones as they are,
or the prop's async ``options()`` run with the values configured so far (Pipedream Connect's
configure call, by component). ``POST /v1/components/{id}/props``: the full prop list for the
values configured so far, ``additionalProps()`` included (Connect's reload props).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from sluice import ids
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.platform import DeployRequest, OptionsRequest, Platform, SavedComponent

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
    saved = await _component(platform, account.id, component)
    props = None
    if all(p["name"] != prop for p in saved.configurable_props):
        # Maybe a prop additionalProps() adds for these values.
        reloaded = await platform.dynamic_props.reload(account.id, saved, body.configured_props)
        props = reloaded.props
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
        props=props,
    )
    return {"data": render.options_page(page)}


class ReloadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    configured_props: dict[str, Any] = Field(
        default_factory=dict,
        description="The values configured so far (any subset); app props as "
        '{"authProvisionId": "apn_..."}.',
    )
    dynamic_props_id: str | None = Field(
        None, description="The id a previous reload answered (accepted; the list is rebuilt)."
    )


@router.post("/v1/components/{component}/props")
async def reload_props(
    component: str,
    account: AccountDep,
    platform: PlatformDep,
    body: ReloadBody | None = None,
) -> dict[str, Any]:
    """Reload props: ``additionalProps()`` run with the values configured so far;
    ``{"data": {"observations", "errors", "dynamicProps": {"id", "configurableProps"}}}``."""
    body = body or ReloadBody()
    saved = await _component(platform, account.id, component)
    found = await platform.dynamic_props.reload(account.id, saved, body.configured_props)
    return {"data": render.prop_set(found)}


async def _component(platform: Platform, account_id: str, component: str) -> SavedComponent:
    """An ``sc_`` id or a key (the account's newest, else the public registry's)."""
    by_id = ids.has_prefix(component, "sc")
    return await platform.sources.resolve_component(
        account_id,
        DeployRequest(
            component_id=component if by_id else None,
            component_key=None if by_id else component,
        ),
    )
