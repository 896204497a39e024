"""``/v1/apps``: the app catalog in Pipedream's shape, an operator's apps, and the start of an
OAuth connection (``POST /v1/apps/{slug}/connect``; the provider then redirects to
``/oauth/callback``, ``api/oauth.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import AppConnect, AppWrite
from sluice.platform import Account

router = APIRouter()


def _admin(account: Account) -> None:
    if not account.is_admin:
        raise errors.Forbidden(
            "only admin accounts register or edit apps (sluice accounts create --admin)"
        )


@router.get("/v1/apps")
async def list_apps(
    account: AccountDep, platform: PlatformDep, q: str | None = None
) -> dict[str, Any]:
    found = [render.app(a) for a in await platform.catalog.list(q)]
    return {
        "page_info": {
            "total_count": len(found),
            "count": len(found),
            "start_cursor": None,
            "end_cursor": None,
        },
        "data": found,
    }


@router.get("/v1/apps/{slug}")
async def read(slug: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """An app by its name slug (``slack``) or, as Pipedream's, by its id (``app_OkrhR1``)."""
    return {"data": render.app(await platform.catalog.get(slug))}


@router.post("/v1/apps")
async def create(body: AppWrite, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    _admin(account)
    app = await platform.catalog.register(body.model_dump(exclude_unset=True))
    return {"data": render.app(app)}


@router.put("/v1/apps/{slug}")
async def update(
    slug: str, body: AppWrite, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    _admin(account)
    app = await platform.catalog.update(slug, body.model_dump(exclude_unset=True))
    return {"data": render.app(app)}


@router.post("/v1/apps/{slug}/connect")
async def connect(
    slug: str, account: AccountDep, platform: PlatformDep, body: AppConnect | None = None
) -> dict[str, Any]:
    """Sluice's start link of a new connection, for a browser to open (a popup or a redirect):
    it ties the connection to that browser, then goes on to the provider (``api/oauth.py``)."""
    body = body or AppConnect()
    started = await platform.oauth.start(account.id, slug, name=body.name, return_to=body.return_to)
    return {
        "data": {
            "authorize_url": started.authorize_url,
            "redirect_uri": started.redirect_uri,
            "expires_at": started.expires_at_ms // 1000,
        }
    }
