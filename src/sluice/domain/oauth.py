"""OAuth 2 decisions, pure: the authorize URL (RFC 6749 §4.1.1, PKCE RFC 7636), token
responses read into ``$auth`` credentials, and when an access token is refreshed.

The protocol's own pieces (the grant URI, the S256 challenge, the token request's body) are
Authlib's (``authlib.oauth2.rfc6749``, ``rfc7636``); what is Sluice's is which parameters go
in them and how an answer becomes ``$auth``. Authlib's HTTP client integration is not used:
in Authlib 1.9 its ``httpx`` client is deprecated in favour of ``httpx2``, and Sluice's
requests to providers keep their own client (``engine/auth/providers.py``).

    >>> needs_refresh(expires_at_ms=1_000_000, now_ms=1_000_000 - REFRESH_MARGIN_MS + 1)
    True
    >>> needs_refresh(expires_at_ms=None, now_ms=0)
    False

A token that lives 300 s (Keycloak's default) is refreshed past half its life, not on every
run, however many runs read it:

    >>> needs_refresh(expires_at_ms=300_000, now_ms=149_000, issued_at_ms=0)
    False
    >>> needs_refresh(expires_at_ms=300_000, now_ms=151_000, issued_at_ms=0)
    True
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from sluice import errors
from sluice.domain.apps import OAuthConfig

#: An access token expiring within this is refreshed before an invocation reads it: long
#: enough for a run that starts now to finish with a valid token.
REFRESH_MARGIN_MS = 5 * 60 * 1000
#: The share of a token's life kept as the margin when that is shorter: a token living less
#: than twice ``REFRESH_MARGIN_MS`` would otherwise be refreshed by every run that reads it.
REFRESH_MARGIN_SHARE = 0.5
#: How long the browser has from the start link to the callback.
STATE_TTL_MS = 15 * 60 * 1000
#: How long one process may hold an account's refresh before another may take it over (a
#: process that died mid-refresh).
LEASE_MS = 30 * 1000
CALLBACK_PATH = "/oauth/callback"
#: Sluice's link to a connection, the one handed out: it ties the connection to the browser
#: that opens it, then goes on to the provider (``start_url``).
START_PATH = "/oauth/start"


def start_url(public_url: str, state: str) -> str:
    """The link a connection is started from, in a browser: it is the API's
    ``authorize_url``; the provider's own URL is only ever sent to the browser that opened
    this one (``bound``).

    >>> start_url("https://sluice.example/", "s1")
    'https://sluice.example/oauth/start?state=s1'
    """
    return public_url.rstrip("/") + START_PATH + "?" + urlencode({"state": state})


def browser_hash(token: str) -> str:
    """What is stored of a browser's token (its ``sluice_oauth`` cookie)."""
    return hashlib.sha256(b"sluice-oauth-browser:" + token.encode()).hexdigest()


def bound(stored_hash: str | None, token: str | None) -> bool:
    """Whether the browser whose cookie is ``token`` is the one the connection was opened in
    (RFC 9700 §4.7.1: the state bound to the user agent). A connection no browser opened
    yet is bound to none.

    >>> bound(browser_hash("b1"), "b1"), bound(browser_hash("b1"), "b2"), bound(None, "b1")
    (True, False, False)
    """
    if stored_hash is None or not token:
        return False
    return hmac.compare_digest(stored_hash, browser_hash(token))


def code_challenge(verifier: str) -> str:
    """S256: BASE64URL(SHA256(verifier)), unpadded (RFC 7636 §4.2).

    >>> code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")  # RFC 7636, appendix B
    'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'
    """
    challenge: str = create_s256_code_challenge(verifier)
    return challenge


def redirect_uri(public_url: str) -> str:
    """The callback every provider is given: ``SLUICE_PUBLIC_URL`` + ``/oauth/callback``."""
    return public_url.rstrip("/") + CALLBACK_PATH


def authorize_url(config: OAuthConfig, *, redirect: str, state: str, verifier: str | None) -> str:
    """The provider's authorize URL: the code grant, with the S256 challenge when the app
    uses PKCE; the app's ``authorize_params`` last (they may replace any of the others).

    >>> config = OAuthConfig("https://p.example/auth?t=1", "https://p.example/token",
    ...                      client_id="cid", scopes=("a", "b"), authorize_params={"prompt": "x"})
    >>> url = authorize_url(config, redirect="https://s.example/cb", state="st", verifier=None)
    >>> url.split("&")  # doctest: +NORMALIZE_WHITESPACE
    ['https://p.example/auth?t=1', 'response_type=code', 'client_id=cid',
     'redirect_uri=https%3A%2F%2Fs.example%2Fcb', 'scope=a+b', 'state=st', 'prompt=x']
    """
    params: dict[str, str] = {
        "response_type": "code",
        "client_id": config.client_id or "",
        "redirect_uri": redirect,
        "state": state,
    }
    if config.scopes:
        params["scope"] = " ".join(config.scopes)
    if verifier is not None:
        params["code_challenge"] = code_challenge(verifier)
        params["code_challenge_method"] = "S256"
    params.update(config.authorize_params)
    uri: str = prepare_grant_uri(
        config.authorize_url, params.pop("client_id"), params.pop("response_type"), **params
    )
    return uri


def code_form(code: str, *, redirect: str, verifier: str | None) -> dict[str, str]:
    """The token request's form for an authorization code (RFC 6749 §4.1.3, RFC 7636 §4.5).

    >>> sorted(code_form("c1", redirect="https://s.example/cb", verifier="v1").items())
    ... # doctest: +NORMALIZE_WHITESPACE
    [('code', 'c1'), ('code_verifier', 'v1'), ('grant_type', 'authorization_code'),
     ('redirect_uri', 'https://s.example/cb')]
    """
    extra = {"code_verifier": verifier} if verifier is not None else {}
    return _form(
        prepare_token_request("authorization_code", code=code, redirect_uri=redirect, **extra)
    )


def refresh_form(refresh_token: str) -> dict[str, str]:
    """The token request's form for a refresh (RFC 6749 §6)."""
    return _form(prepare_token_request("refresh_token", refresh_token=refresh_token))


def _form(body: str) -> dict[str, str]:
    return dict(parse_qsl(body, keep_blank_values=True))


@dataclass(frozen=True)
class Tokens:
    """A token endpoint's answer, read."""

    access_token: str
    refresh_token: str | None
    #: Epoch ms; None when the provider gave no ``expires_in`` (the token does not expire).
    expires_at_ms: int | None
    raw: dict[str, Any]


def read_tokens(body: Any, now_ms: int) -> Tokens:
    """RFC 6749 §5.1; an error answer (§5.2) raises ``OAuthRefused`` with its code."""
    if not isinstance(body, dict):
        raise errors.OAuthUnavailable("the token endpoint did not answer a JSON object")
    if body.get("error") or not isinstance(body.get("access_token"), str):
        # Slack answers 200 {"ok": false, "error": "invalid_code"}.
        raise errors.OAuthRefused(
            f"the provider refused: {body.get('error') or 'no access_token'}"
            + (f" ({body['error_description']})" if body.get("error_description") else ""),
            details={"error": body.get("error")},
        )
    expires_in = body.get("expires_in")
    expires_at = None
    if isinstance(expires_in, int | float) or (
        isinstance(expires_in, str) and expires_in.isdigit()
    ):
        expires_at = now_ms + int(float(expires_in) * 1000)
    refresh = body.get("refresh_token")
    return Tokens(
        access_token=body["access_token"],
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at_ms=expires_at,
        raw=body,
    )


#: The size of a connected account's ``provider_uid`` column.
MAX_UID_CHARS = 300


def uid_of(body: Any, path: str) -> str | None:
    """The value at a dotted ``path`` (``authed_user.id``), as a string; None when absent.
    An id too long to keep is the provider answering nonsense (never cut: a cut id could
    name two users).

    >>> uid_of({"authed_user": {"id": 42}}, "authed_user.id"), uid_of({}, "id")
    ('42', None)
    >>> uid_of({"id": "x" * 301}, "id")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sluice.errors.OAuthUnavailable: the provider's user id is 301 characters long; ...
    """
    value = body
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        uid = str(value)
        if len(uid) > MAX_UID_CHARS:
            raise errors.OAuthUnavailable(
                f"the provider's user id is {len(uid)} characters long; at most "
                f"{MAX_UID_CHARS} are kept"
            )
        return uid
    return None


def credentials(
    tokens: Tokens, *, uid: str | None, client_id: str | None, before: dict[str, Any] | None
) -> dict[str, Any]:
    """What ``this.<app>.$auth`` holds. A refresh answer without a new refresh token keeps
    the old one (RFC 6749 §6: rotation is the provider's choice)."""
    previous = before or {}
    return {
        "oauth_access_token": tokens.access_token,
        "oauth_refresh_token": tokens.refresh_token or previous.get("oauth_refresh_token"),
        "oauth_uid": uid if uid is not None else previous.get("oauth_uid"),
        "oauth_client_id": client_id,
    }


def refresh_margin_ms(*, expires_at_ms: int, issued_at_ms: int | None) -> int:
    """How long before its expiry a token is refreshed: ``REFRESH_MARGIN_MS``, or half its
    life when that is shorter (``issued_at_ms``: when it was stored; None: not known).

    >>> refresh_margin_ms(expires_at_ms=3_600_000, issued_at_ms=0) == REFRESH_MARGIN_MS
    True
    >>> refresh_margin_ms(expires_at_ms=300_000, issued_at_ms=0)
    150000
    """
    if issued_at_ms is None:
        return REFRESH_MARGIN_MS
    life = max(0, expires_at_ms - issued_at_ms)
    return min(REFRESH_MARGIN_MS, int(life * REFRESH_MARGIN_SHARE))


def needs_refresh(
    *, expires_at_ms: int | None, now_ms: int, issued_at_ms: int | None = None
) -> bool:
    if expires_at_ms is None:
        return False
    margin = refresh_margin_ms(expires_at_ms=expires_at_ms, issued_at_ms=issued_at_ms)
    return expires_at_ms - now_ms < margin
