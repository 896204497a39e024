"""Bearer API keys: every ``/v1`` route depends on ``current_account``.

A browser logged in to the web UI may call ``/v1`` with its session cookie instead (the
pages' live streams do); a state-changing call then also needs the session's
``X-CSRF-Token`` header and a same-origin ``Origin``, as the pages' own forms do."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sluice import errors, public_url
from sluice.platform import Account, Platform
from sluice.web import session as sessions


async def get_platform(request: Request) -> Platform:
    # async: FastAPI runs a sync dependency in a thread, a hand-off on every request.
    platform: Platform = request.state.platform
    return platform


async def current_account(request: Request) -> Account:
    header = request.headers.get("authorization", "")
    if not header and sessions.COOKIE in request.cookies:
        return await _session_account(request)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise errors.Unauthorized(
            "missing API key: send the header 'Authorization: Bearer <api key>'"
        )
    account = await (await get_platform(request)).authenticate(token.strip())
    if account is None:
        raise errors.Unauthorized("invalid or revoked API key")
    public_url.remember(account.id)  # for links made later with no request (public_url.py)
    return account


async def _session_account(request: Request) -> Account:
    session = await sessions.current(request)
    if session is None:
        raise errors.Unauthorized("the browser session has ended: log in again")
    if request.method not in sessions.SAFE_METHODS:
        sessions.check_csrf(request, session, request.headers.get(sessions.CSRF_HEADER))
    public_url.remember(session.account.id)
    return session.account


PlatformDep = Annotated[Platform, Depends(get_platform)]
AccountDep = Annotated[Account, Depends(current_account)]
