"""The first-run owner page, login, logout, and the API keys page."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice import errors
from sluice.platform import SESSION_TTL_S
from sluice.web import connected, render
from sluice.web import session as sessions

router = APIRouter(include_in_schema=False)


@router.get("/")
async def home(request: Request) -> Response:
    platform = sessions.platform_of(request)
    if await platform.logins.needs_owner():
        return render.redirect("/setup")
    if await sessions.current(request) is None:
        return render.redirect("/login")
    return render.redirect("/sources")


@router.get("/setup")
async def setup_form(request: Request) -> Response:
    if not await sessions.platform_of(request).logins.needs_owner():
        return render.redirect("/")
    return render.page(request, "setup.html", {"values": {}})


@router.post("/setup")
async def setup(request: Request) -> Response:
    platform = sessions.platform_of(request)
    if not sessions.same_origin(request):
        raise errors.Forbidden("cross-origin request refused")
    form = await request.form()
    values = {k: render.text(form, k) for k in ("username", "email", "password")}
    problem: errors.SluiceError | None = None
    if not values["username"].strip():
        problem = errors.InvalidRequest("choose a username", field="username")
    elif values["password"] != render.text(form, "password2"):
        problem = errors.InvalidRequest("the two passwords differ", field="password2")
    if problem is None:
        try:
            token = await platform.create_owner(
                values["username"].strip(), values["email"].strip() or None, values["password"]
            )
        except (errors.InvalidRequest, errors.Conflict) as exc:
            problem = exc
    if problem is not None:
        del values["password"]
        context = {"values": values, "error": problem, **render.page_address(request, "/setup")}
        return render.page(request, "setup.html", context, status=400)
    response = render.redirect("/sources")
    sessions.set_cookie(request, response, token, SESSION_TTL_S)
    return response


@router.get("/login")
async def login_form(request: Request) -> Response:
    if await sessions.platform_of(request).logins.needs_owner():
        return render.redirect("/setup")
    wanted = connected.local_path(request.query_params.get("next"))
    return render.page(request, "login.html", {"values": {}, "next": wanted})


@router.post("/login")
async def login(request: Request) -> Response:
    if not sessions.same_origin(request):
        raise errors.Forbidden("cross-origin request refused")
    form = await request.form()
    identifier = render.text(form, "username")
    client = request.client.host if request.client else ""
    wanted = connected.local_path(render.text(form, "next") or None)
    try:
        token = await sessions.platform_of(request).logins.login(
            identifier, render.text(form, "password"), client=client
        )
    except (errors.Unauthorized, errors.RateLimited) as exc:
        context = {"values": {"username": identifier}, "error": exc, "next": wanted}
        context |= render.page_address(
            request, "/login" + (f"?next={quote(wanted, safe='')}" if wanted else "")
        )
        status = 429 if isinstance(exc, errors.RateLimited) else 401
        refused = render.page(request, "login.html", context, status=status)
        if isinstance(exc, errors.RateLimited):
            refused.headers["Retry-After"] = str(exc.retry_after_seconds)
        return refused
    response = render.redirect(wanted or "/sources")
    sessions.set_cookie(request, response, token, SESSION_TTL_S)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).logins.logout(session.token)
    response = render.redirect("/login")
    sessions.clear_cookie(response)
    return response


@router.get("/settings/keys")
async def keys(request: Request, created: str | None = None) -> Response:
    session = await sessions.required(request)
    found = await sessions.platform_of(request).logins.keys(session.account.id)
    return render.page(request, "keys.html", {"keys": found}, session=session)


@router.post("/settings/keys")
async def create_key(request: Request) -> Response:
    session = await sessions.required(request)
    form = await render.checked_form(request, session)
    logins = sessions.platform_of(request).logins
    name = render.text(form, "name")
    try:
        key = await logins.create_key(session.account.id, name)
    except errors.InvalidRequest as exc:
        found = await logins.keys(session.account.id)
        context = {"keys": found, "error": exc, "name": name}
        context |= render.page_address(request, "/settings/keys")
        return render.page(request, "keys.html", context, session=session, status=400)
    found = await logins.keys(session.account.id)
    # Shown in this answer only: it is not stored in clear, and never rendered again (a reload
    # shows the list: the address is the page's, so it does not make a second key).
    context = {"keys": found, "new_key": key, "new_name": name.strip()}
    context |= render.page_address(request, "/settings/keys")
    return render.page(request, "keys.html", context, session=session)


@router.post("/settings/keys/{key_id}/revoke")
async def revoke_key(request: Request, key_id: str) -> Response:
    session = await sessions.required(request)
    await render.checked_form(request, session)
    await sessions.platform_of(request).logins.revoke_key(session.account.id, key_id)
    return render.redirect("/settings/keys")
