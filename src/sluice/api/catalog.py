"""``GET /v1/users/me/components``: the account's saved components, newest first.

Paginated as ``/v1/users/me/sources`` (cursors are base64url of an ``sc_`` id). Each item is
the component without its code (``GET /v1/components/{id}`` has it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from sluice import errors, ids
from sluice.api.auth import AccountDep, PlatformDep
from sluice.storage import components as store

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
    cursors: dict[str, str] = {}
    for name, value in (("before", before), ("after", after)):
        if value is not None:
            decoded = ids.decode_cursor(value)
            if decoded is None or not ids.has_prefix(decoded, "sc"):
                raise errors.InvalidRequest(f"{name} is not a cursor from page_info", field=name)
            cursors[name] = decoded
    async with platform.db.connect() as conn:
        page = await store.page(
            conn,
            account.id,
            limit=limit,
            before=cursors.get("before"),
            after=cursors.get("after"),
            component_type=type,
        )
    data = []
    for component in page.items:
        item = component.to_api()
        del item["code"]
        data.append(item)
    return {
        "page_info": {
            "total_count": page.total_count,
            "count": len(data),
            "start_cursor": ids.encode_cursor(data[0]["id"]) if data else None,
            "end_cursor": ids.encode_cursor(data[-1]["id"]) if data else None,
        },
        "data": data,
    }
