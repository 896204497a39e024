"""``GET /v1/users/me/components``: the account's saved components, newest first.

Paginated as ``/v1/users/me/sources`` (cursors are base64url of an ``sc_`` id). Each item is
the component without its code (``GET /v1/components/{id}`` has it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from sluice.api import paging, render
from sluice.api.auth import AccountDep, PlatformDep

router = APIRouter()


@router.get("/v1/users/me/components")
async def list_components(
    account: AccountDep,
    platform: PlatformDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    before: str | None = None,
    after: str | None = None,
    type: Annotated[
        Literal["source", "action"] | None, Query(description="Only sources or only actions.")
    ] = None,
) -> dict[str, Any]:
    before_id, after_id = paging.cursors(before, after, "sc")
    page = await platform.component_page(
        account.id, limit=limit, before=before_id, after=after_id, component_type=type
    )
    data = []
    for component in page.items:
        item = render.component(component)
        del item["code"]
        data.append(item)
    return paging.body(data, page.total_count)
