"""``/v1/sources``: deploy, read, run by hand, delete, and the events and logs of a source."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from sluice import errors
from sluice.api import paging, render, workspaces
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.components import component_input
from sluice.api.schemas import SourceCreate, SourceRun, SourceUpdate
from sluice.platform import Account, Deployment, DeployRequest, Platform, UpdateRequest

router = APIRouter()


async def _render(platform: Platform, deployment: Deployment) -> dict[str, Any]:
    component = await platform.components.by_id(deployment.component_id)
    return render.deployment(
        deployment, component, endpoint_url=platform.endpoint_url(deployment.endpoint_id)
    )


@router.post("/v1/sources")
async def deploy(body: SourceCreate, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    deployment = await platform.sources.deploy(
        account.id,
        DeployRequest(
            component_id=body.component_id,
            component_key=body.component_key,
            source=component_input(body),
            name=body.name,
            configured_props=body.configured_props,
            active=body.active,
        ),
    )
    return {"data": await _render(platform, deployment)}


@router.get("/v1/sources/{source_id}")
async def read(source_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    deployment = await platform.sources.get(account.id, source_id)
    return {"data": await _render(platform, deployment)}


@router.delete("/v1/sources/{source_id}")
async def delete(source_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    hook_failed = await platform.sources.delete(account.id, source_id)
    return {"warnings": [hook_failed]} if hook_failed else {}


@router.post("/v1/sources/{source_id}/run")
async def run(
    source_id: str, account: AccountDep, platform: PlatformDep, body: SourceRun | None = None
) -> dict[str, Any]:
    outcome = await platform.sources.run(
        account.id, source_id, body.event if body is not None else None
    )
    return {"data": render.invocation(outcome)}


@router.get("/v1/sources/{source_id}/event_summaries")
async def event_summaries(
    source_id: str,
    account: AccountDep,
    platform: PlatformDep,
    expand: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    before: str | None = None,
    after: str | None = None,
    event_name: str | None = None,
) -> dict[str, Any]:
    expanded = paging.check_expand(expand)
    deployment = await platform.sources.get(account.id, source_id)
    page = await paging.event_page(
        platform, deployment.id, channel=event_name, limit=limit, before=before, after=after
    )
    data = [render.event_summary(e, expand=expanded) for e in page.items]
    return paging.id_body(data, page.total_count)


@router.delete("/v1/sources/{source_id}/events", status_code=202)
async def delete_events(
    source_id: str,
    account: AccountDep,
    platform: PlatformDep,
    start_id: str | None = None,
    end_id: str | None = None,
    event_name: str | None = None,
) -> dict[str, Any]:
    """Delete the events from ``start_id`` to ``end_id`` (both inclusive, either open; none:
    all), only ``event_name``'s channel when given. Pipedream answers 202 and deletes later;
    Sluice has deleted them when it answers (202, ``{}``)."""
    start, end = (
        paging.event_position(start_id, "start_id"),
        paging.event_position(end_id, "end_id"),
    )
    if start is not None and end is not None and start > end:
        raise errors.InvalidRequest("start_id is after end_id", field="start_id")
    deployment = await platform.sources.get(account.id, source_id)
    await platform.events.delete_range(deployment.id, start=start, end=end, channel=event_name)
    return {}


@router.get("/v1/sources/{source_id}/logs")
async def logs(
    source_id: str,
    account: AccountDep,
    platform: PlatformDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
) -> dict[str, Any]:
    deployment = await platform.sources.get(account.id, source_id)
    entries = await platform.events.recent_logs(deployment.id, limit)
    return {"data": [render.log_line(line) for line in entries]}


@router.get("/v1/users/me/sources")
@router.get("/v1/users/me/sources/", include_in_schema=False)
async def list_sources(
    account: AccountDep,
    platform: PlatformDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """The account's sources, newest first; cursors are base64url of a source id."""
    return await _list(account, platform, limit, before, after)


@router.get("/v1/orgs/{org_id}/sources")
async def list_org_sources(
    org_id: str,
    account: AccountDep,
    platform: PlatformDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """Pipedream's workspace listing: a Sluice account is its own workspace."""
    workspaces.check(account, org_id)
    return await _list(account, platform, limit, before, after)


async def _list(
    account: Account, platform: Platform, limit: int, before: str | None, after: str | None
) -> dict[str, Any]:
    before_id, after_id = paging.cursors(before, after, "dc")
    page = await platform.sources.list(account.id, limit=limit, before=before_id, after=after_id)
    return paging.body([await _render(platform, d) for d in page.items], page.total_count)


@router.put("/v1/sources/{source_id}")
async def update(
    source_id: str, body: SourceUpdate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    source = component_input(body)
    component = None
    if source is not None or body.component_id or body.component_key:
        component = DeployRequest(
            component_id=body.component_id, component_key=body.component_key, source=source
        )
    deployment = await platform.sources.update(
        account.id,
        source_id,
        UpdateRequest(
            component=component,
            name=body.name,
            configured_props=body.configured_props,
            active=body.active,
        ),
    )
    return {"data": await _render(platform, deployment)}
