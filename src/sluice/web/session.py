"""Browser sessions: the cookie, the CSRF token, the same-origin check; and the browser's
OAuth binding (``sluice_oauth``: the connections it opened finish only with it).

The session cookie is HttpOnly and SameSite=Lax and holds a random token whose sha256 alone is
stored. The CSRF token is derived from the session token (a synchronizer token without a
table): pages carry it in a hidden field and in htmx's ``X-CSRF-Token`` header; a script on
another site can read neither. Every state-changing request also needs a same-origin
``Origin`` (or ``Referer``) when the browser sends one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from sluice import errors
from sluice.domain.oauth import STATE_TTL_MS
from sluice.platform import Account, Platform

COOKIE = "sluice_session"
#: The browser's OAuth token, a random value whose hash the connections it opened keep.
OAUTH_COOKIE = "sluice_oauth"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Session:
    account: Account
    token: str

    @property
    def csrf(self) -> str:
        return csrf_token(self.token)


def csrf_token(session_token: str) -> str:
    return hashlib.sha256(b"sluice-csrf:" + session_token.encode()).hexdigest()


def platform_of(request: Request) -> Platform:
    platform: Platform = request.state.platform
    return platform


async def current(request: Request) -> Session | None:
    token = request.cookies.get(COOKIE)
    if not token or len(token) > 200:
        return None
    account = await platform_of(request).logins.session_account(token)
    return Session(account, token) if account is not None else None


async def required(request: Request) -> Session:
    found = await current(request)
    if found is None:
        raise errors.LoginRequired
    return found


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed or claimed == "null":
        # No header at all: not a cross-site browser form (those send Origin); the token decides.
        return claimed is None
    parts = urlsplit(claimed)
    return (parts.scheme, parts.netloc) == (request.url.scheme, request.headers.get("host", ""))


def check_csrf(request: Request, session: Session, sent: str | None) -> None:
    """Refuse a state-changing request without this session's token or from another origin."""
    if not same_origin(request):
        raise errors.Forbidden("cross-origin request refused")
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        raise errors.Forbidden("missing or wrong CSRF token: reload the page and try again")


def set_cookie(request: Request, response: Response, token: str, max_age: int) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=max_age,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")


def oauth_browser(request: Request) -> str:
    """This browser's ``sluice_oauth`` token, or a new one (``set_oauth_cookie`` keeps it)."""
    token = request.cookies.get(OAUTH_COOKIE) or ""
    return token if 20 <= len(token) <= 100 else secrets.token_urlsafe(32)


def set_oauth_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        OAUTH_COOKIE,
        token,
        max_age=STATE_TTL_MS // 1000,
        httponly=True,
        samesite="lax",  # sent on the provider's redirect back (a top-level GET)
        secure=request.url.scheme == "https",
        path="/oauth",
    )
