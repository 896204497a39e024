"""The browser's part of connecting an OAuth account (``engine/auth/oauth.py``), with no API key:
the ``state`` the connection started with names the account.

- ``GET /oauth/start?state=…``: the link ``POST /v1/apps/{slug}/connect`` hands out. It asks
  the browser whether it started this connection, naming the Sluice account it connects to
  (a browser signed in to the web UI as that account is not asked; one signed in as another
  account is refused); ``POST /oauth/start`` (same origin only) then binds the connection to
  this browser (the ``sluice_oauth`` cookie) and sends it on to the provider.
- ``GET /oauth/callback``: where the provider sends the browser back (``SLUICE_PUBLIC_URL`` +
  ``/oauth/callback``); it finishes the connection only in the browser it was bound to.

Answers are small HTML pages (no script), or a redirect to the ``return_to`` path the
connection was started with."""

from __future__ import annotations

import html
import urllib.parse

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluice import errors
from sluice.api import errors as api_errors
from sluice.api.auth import PlatformDep
from sluice.domain.oauth import CALLBACK_PATH, START_PATH
from sluice.platform import OAuthOpening
from sluice.web import session as sessions

router = APIRouter()

#: The page may style itself and nothing else: no script, no frames, no loads.
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}


def page(title: str, message: str, status: int, form: str = "") -> HTMLResponse:
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font:16px system-ui,sans-serif;max-width:36em;margin:4em auto;"
        "padding:0 1em;color:#222}h1{font-size:1.3em}button{font:inherit;padding:.4em 1em}"
        f"</style></head><body><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>"
        f"{form}</body></html>"
    )
    # The form posts here: the browser must send its origin (no-referrer would make it null).
    headers = {**_HEADERS, "Referrer-Policy": "same-origin"} if form else _HEADERS
    return HTMLResponse(body, status_code=status, headers=headers)


@router.get(START_PATH, include_in_schema=False)
async def start(request: Request, platform: PlatformDep) -> Response:
    return await _open(request, platform, confirmed=False)


@router.post(START_PATH, include_in_schema=False)
async def confirm(request: Request, platform: PlatformDep) -> Response:
    if not sessions.same_origin(request):
        return page("Not connected", "cross-origin request refused", 403)
    return await _open(request, platform, confirmed=True)


async def _open(request: Request, platform: PlatformDep, *, confirmed: bool) -> Response:
    if confirmed:
        form = await request.form()
        state = form.get("state")
    else:
        state = request.query_params.get("state")
    state = state if isinstance(state, str) else ""
    try:
        opening = await platform.oauth.opening(state)
    except errors.SluiceError as exc:
        return page("Not connected", exc.message, api_errors.status_of(exc))
    session = await sessions.current(request)
    if session is not None and session.account.id != opening.owner_id:
        return page(
            "Not connected",
            f"This link connects a {opening.app_name} account to the Sluice account "
            f"{opening.username}, and this browser is signed in as {session.account.username}. "
            "Start the connection again as that account, or sign out first.",
            403,
        )
    if not confirmed and session is None:
        return _ask(opening, state)
    browser = sessions.oauth_browser(request)
    try:
        provider_url = await platform.oauth.bind(state, browser)
    except errors.SluiceError as exc:
        return page("Not connected", exc.message, api_errors.status_of(exc))
    response = RedirectResponse(provider_url, status_code=303, headers=_HEADERS)
    sessions.set_oauth_cookie(request, response, browser)
    return response


def _ask(opening: OAuthOpening, state: str) -> HTMLResponse:
    app, who = opening.app_name, opening.username
    form = (
        # Relative: this page's own path, under a public URL with a path prefix too.
        "<form method=post action=start>"
        f'<input type=hidden name=state value="{html.escape(state)}">'
        f"<button>Continue to {html.escape(app)}</button></form>"
    )
    return page(
        f"Connect {app} to {who}?",
        f"This connects a {app} account to the Sluice account {who}. Continue only if you "
        f"started this connection yourself: whoever approves it at {app} gives the Sluice "
        f"account {who} the use of their {app} account.",
        200,
        form,
    )


@router.get(CALLBACK_PATH, include_in_schema=False)
async def callback(request: Request, platform: PlatformDep) -> Response:
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    try:
        finished = await platform.oauth.finish(params, request.cookies.get(sessions.OAUTH_COOKIE))
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
