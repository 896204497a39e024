"""``GET /oauth/callback``: where OAuth providers send the browser back (``SLUICE_PUBLIC_URL``
+ ``/oauth/callback``). No API key here: the ``state`` the connection started with names the
account. The answer is a small HTML page (no script), or a redirect to the ``return_to`` path
the connection was started with."""

from __future__ import annotations

import html
import urllib.parse

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluice import errors
from sluice.api import errors as api_errors
from sluice.api.auth import PlatformDep
from sluice.domain.oauth import CALLBACK_PATH

router = APIRouter()

#: The page may style itself and nothing else: no script, no frames, no loads.
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}


def page(title: str, message: str, status: int) -> HTMLResponse:
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font:16px system-ui,sans-serif;max-width:36em;margin:4em auto;"
        "padding:0 1em;color:#222}h1{font-size:1.3em}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers=_HEADERS)


@router.get(CALLBACK_PATH, include_in_schema=False)
async def callback(request: Request, platform: PlatformDep) -> Response:
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    try:
        finished = await platform.oauth.finish(params)
    except errors.SluiceError as exc:
        return page("Not connected", exc.message, api_errors.status_of(exc))
    account = finished.account
    if finished.return_to is not None:
        query = urllib.parse.urlencode({"account_id": account.id, "app": account.app})
        joiner = "&" if "?" in finished.return_to else "?"
        return RedirectResponse(
            finished.return_to + joiner + query, status_code=303, headers=_HEADERS
        )
    verb = "Reconnected" if finished.reconnected else "Connected"
    who = f" as {account.provider_uid}" if account.provider_uid else ""
    return page(
        f"{verb} {account.app}",
        f"{verb} {account.app}{who}: account {account.id}. You can close this window.",
        200,
    )
