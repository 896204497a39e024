"""OAuth API clients (``engine/auth/api_clients.py``): ``POST /v1/oauth/token`` (the
``client_credentials`` grant of RFC 6749 §4.4, in Pipedream's request and response shapes),
``POST /v1/oauth/revoke`` (RFC 7009), and the account's clients under ``/v1/oauth/clients``.

The token and revoke routes take no bearer token: the client's credentials are the proof, in
the body (JSON, as Pipedream's docs send them, or ``application/x-www-form-urlencoded``, as
RFC 6749 does) or in HTTP Basic auth (RFC 6749 §2.3.1). Their errors are RFC 6749 §5.2's
``{"error": "<code>", "error_description": …}`` rather than Sluice's usual body, because OAuth
client libraries read ``error`` as the code. See docs/api.md, "OAuth API clients".
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import parse_qsl, unquote

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import OAuthClientCreate
from sluice.platform import Account

router = APIRouter()

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _oauth_error(status: int, code: str, description: str) -> JSONResponse:
    headers = dict(_NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="sluice"'
    return JSONResponse(
        {"error": code, "error_description": description}, status_code=status, headers=headers
    )


async def _params(request: Request) -> dict[str, str] | JSONResponse:
    """The request's parameters (JSON or form body) and its client credentials (body or
    Basic auth: not both, RFC 6749 §2.3); the error answer when they cannot be read."""
    raw = await request.body()
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    params: dict[str, Any] = {}
    if raw and kind == "application/json":
        try:
            loaded = json.loads(raw)
        except ValueError:
            return _oauth_error(400, "invalid_request", "the body is not JSON")
        if not isinstance(loaded, dict):
            return _oauth_error(400, "invalid_request", "the body is not a JSON object")
        params = loaded
    elif raw:
        params = dict(parse_qsl(raw.decode("utf-8", errors="replace"), keep_blank_values=True))
    out = {k: v for k, v in params.items() if isinstance(v, str)}
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        if "client_id" in out or "client_secret" in out:
            return _oauth_error(
                400,
                "invalid_request",
                "send the client's credentials once: in Basic auth or in the body",
            )
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return _oauth_error(401, "invalid_client", "malformed Basic credentials")
        client_id, _, secret = decoded.partition(":")
        out["client_id"], out["client_secret"] = unquote(client_id), unquote(secret)
    return out


def _missing_client(params: dict[str, str]) -> JSONResponse | None:
    if not params.get("client_id") or not params.get("client_secret"):
        return _oauth_error(401, "invalid_client", "client_id and client_secret are required")
    return None


@router.post("/v1/oauth/token", response_model=None)
async def token(request: Request, platform: PlatformDep) -> JSONResponse:
    """Exchange an OAuth client's credentials for a bearer token (``client_credentials``)."""
    params = await _params(request)
    if isinstance(params, JSONResponse):
        return params
    grant = params.get("grant_type")
    if not grant:
        return _oauth_error(400, "invalid_request", "grant_type is required")
    if grant != "client_credentials":
        return _oauth_error(
            400, "unsupported_grant_type", "only grant_type=client_credentials is supported"
        )
    if params.get("scope"):
        return _oauth_error(400, "invalid_scope", "Sluice's tokens take no scope")
    if (missing := _missing_client(params)) is not None:
        return missing
    issued = await platform.api_clients.issue(params["client_id"], params["client_secret"])
    if issued is None:
        return _oauth_error(401, "invalid_client", "unknown client or wrong client_secret")
    body = {
        "access_token": issued.access_token,
        "token_type": "Bearer",
        "expires_in": issued.expires_in,
        "created_at": issued.created_at,
    }
    return JSONResponse(body, headers=_NO_STORE)


@router.post("/v1/oauth/revoke", response_model=None)
async def revoke(request: Request, platform: PlatformDep) -> JSONResponse:
    """Revoke one of the client's tokens (RFC 7009): ``{}``, also for a token that is not
    one (already expired, revoked or unknown)."""
    params = await _params(request)
    if isinstance(params, JSONResponse):
        return params
    if not params.get("token"):
        return _oauth_error(400, "invalid_request", "token is required")
    if (missing := _missing_client(params)) is not None:
        return missing
    if not await platform.api_clients.revoke(
        params["client_id"], params["client_secret"], params["token"]
    ):
        return _oauth_error(401, "invalid_client", "unknown client or wrong client_secret")
    return JSONResponse({}, headers=_NO_STORE)


async def key_account(request: Request, account: AccountDep) -> Account:
    """The account, when the caller used an API key or a browser session: an OAuth access
    token cannot mint or remove clients (a leaked short-lived token would make a lasting one)."""
    _, _, value = request.headers.get("authorization", "").partition(" ")
    if value.strip().startswith("slo_"):
        raise errors.Forbidden("an OAuth access token cannot manage OAuth clients: use an API key")
    return account


@router.post("/v1/oauth/clients")
async def create_client(
    platform: PlatformDep,
    body: OAuthClientCreate | None = None,
    account: Account = Depends(key_account),
) -> dict[str, Any]:
    """A new OAuth client; its ``client_secret`` is in this answer only."""
    name = body.name if body is not None else None
    client, secret = await platform.api_clients.create(account.id, name)
    return {"data": {**render.oauth_client(client), "client_secret": secret}}


@router.get("/v1/oauth/clients")
async def list_clients(
    platform: PlatformDep, account: Account = Depends(key_account)
) -> dict[str, Any]:
    """The account's OAuth clients (never their secrets)."""
    return {"data": [render.oauth_client(c) for c in await platform.api_clients.all(account.id)]}


@router.delete("/v1/oauth/clients/{client_id}")
async def delete_client(
    client_id: str, platform: PlatformDep, account: Account = Depends(key_account)
) -> dict[str, Any]:
    """Delete a client: its tokens stop working at once."""
    await platform.api_clients.delete(account.id, client_id)
    return {}
