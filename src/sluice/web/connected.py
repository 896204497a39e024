"""Connected accounts (``$auth`` credentials): list, connect, delete.

OAuth apps connect through the platform's flow (``platform.oauth.start``, the same call as
``POST /v1/apps/{slug}/connect``): the browser goes to the provider, which sends it back to
``/oauth/callback``, and that to the page the user came from (``return_to``) with
``?account_id=apn_…&app=…``. Key apps of the catalog get a form from their fields
(``custom_fields_json``); apps outside the catalog, free field rows.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Request
from starlette.datastructures import URL, FormData
from starlette.responses import Response

from sluice import errors
from sluice.domain.apps import App
from sluice.platform import Platform
from sluice.web import render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)

CREDENTIAL = "cred."  # a catalog key app's field: cred.<name>


def local_path(value: str | None) -> str | None:
    """A path on this server, never another host (browsers read ``//x`` and ``/\\x`` as one)."""
    if not value or not value.startswith("/") or value.startswith("//"):
        return None
    if "\\" in value or not value.isprintable() or len(value) > 2000:
        return None
    return value


def here(request: Request) -> str | None:
    """Where a Connect button on this page brings the browser back: this page (for a POST,
    the page it was posted from), without the previous connection's ``account_id``/``app``."""
    if request.method == "GET":
        url = request.url
    else:
        referer = request.headers.get("referer") or ""
        url = URL(referer)
        if (url.scheme, url.netloc) != (request.url.scheme, request.headers.get("host", "")):
            return None
    query = [(k, v) for k, v in parse_qsl(url.query) if k not in ("account_id", "app")]
    return local_path(url.path + ("?" + urlencode(query) if query else ""))


def _back(return_to: str, account_id: str, app: str) -> str:
    """``return_to`` with the new account named, as the OAuth callback sends it."""
    joiner = "&" if "?" in return_to else "?"
    return return_to + joiner + urlencode({"account_id": account_id, "app": app})


async def _context(platform: Platform, owner_id: str, app: str, **extra: Any) -> dict[str, Any]:
    catalog = await platform.catalog.list()
    return {
        "accounts": await platform.apps.list(owner_id),
        "app": app,
        "app_def": await platform.catalog.find(app) if app else None,
        "oauth_apps": [a for a in catalog if a.auth_type == "oauth" and a.connectable],
        "key_apps": [a for a in catalog if a.auth_type == "keys"],
        "rows": [("", "")],
        **extra,
    }


@router.get("/accounts")
async def accounts(
    request: Request,
    app: str | None = None,
    account_id: str | None = None,
    return_to: str | None = None,
) -> Response:
    session = await sessions.required(request)
    platform = sessions.platform_of(request)
    context = await _context(
        platform,
        session.account.id,
        (app or "").strip(),
        connected=account_id,
        return_to=local_path(return_to),
    )
    return render.page(request, "accounts.html", context, session=session)


def _credentials(form: FormData, app_def: App | None) -> dict[str, str]:
    """The posted credentials: a catalog key app's fields, else the free rows."""
    if app_def is not None and app_def.auth_type == "keys" and app_def.fields:
        given = {f.name: render.text(form, CREDENTIAL + f.name) for f in app_def.fields}
        return {k: v for k, v in given.items() if v != ""}
    keys, values = form.getlist("field_key"), form.getlist("field_value")
    return {str(k).strip(): str(v) for k, v in zip(keys, values, strict=False) if str(k).strip()}


@router.post("/accounts")
async def connect(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    app = render.text(form, "app").strip()
    name = render.text(form, "name").strip() or None
    return_to = local_path(render.text(form, "return_to"))
    app_def = await platform.catalog.find(app) if app else None
    credentials = _credentials(form, app_def)
    try:
        if not app:
            raise errors.InvalidRequest("name the app, e.g. slack", field="app")
        if not credentials and not (app_def and app_def.fields):
            raise errors.InvalidRequest("give at least one credential field", field="credentials")
        made = await platform.apps.connect(session.account.id, app, name, credentials)
    except errors.SluiceError as exc:
        keys = form.getlist("field_key")
        context = await _context(
            platform,
            session.account.id,
            app,
            name=name,
            rows=[(str(k), "") for k in keys] or [("", "")],
            error=exc,
            return_to=return_to,
            typed={k: v for k, v in form.items() if isinstance(v, str)},
        )
        context |= render.page_address(
            request, f"/accounts?app={quote(app)}" if app else "/accounts"
        )
        return render.page(request, "accounts.html", context, session=session, status=400)
    return render.redirect(_back(return_to or "/accounts", made.id, made.app))


def _go(request: Request, url: str) -> Response:
    """Send the browser to ``url``. From htmx: its ``HX-Redirect`` (a script navigation: the
    page's CSP ``form-action 'self'`` would stop a form's redirect to the provider). Without
    script: a page with the link to follow."""
    if request.headers.get("hx-request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": url, **render.HEADERS})
    if url.startswith("/"):
        return render.redirect(url)
    return render.page(request, "connect_go.html", {"url": url})


@router.post("/accounts/connect")
async def start(request: Request) -> Response:
    """Connect (or reconnect) an account of ``app``: OAuth apps go to the provider; other
    apps to their add form, which comes back to ``return_to`` once saved."""
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    platform = sessions.platform_of(request)
    app = render.text(form, "app").strip()
    name = render.text(form, "name").strip() or None
    return_to = local_path(render.text(form, "return_to"))
    found = await platform.catalog.find(app) if app else None
    if found is None or found.auth_type != "oauth" or not found.connectable:
        # The add form says what the app needs (its fields, or an operator's client id).
        query = {"app": app, **({"return_to": return_to} if return_to else {})}
        return _go(request, "/accounts?" + urlencode(query))
    # Bound to this browser from the start: the provider's URL, no start link to leak.
    browser = sessions.oauth_browser(request)
    started = await platform.oauth.start(
        session.account.id, app, name=name, return_to=return_to or "/accounts", browser=browser
    )
    response = _go(request, started.authorize_url)
    sessions.set_oauth_cookie(request, response, browser)
    return response


@router.post("/accounts/{account_id}/delete")
async def delete(request: Request, account_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    if not await sessions.platform_of(request).apps.delete(session.account.id, account_id):
        raise errors.NotFound(f"connected account {account_id} not found")
    return render.redirect("/accounts")
