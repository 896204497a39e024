"""Sluice's requests to OAuth 2 providers: the token endpoint (a code or a refresh token) and
the user-info endpoint (who connected), over Sluice's own ``httpx`` client (Authlib's client
integration for httpx is deprecated: ``domain/oauth.py``). Network failures become
``OAuthUnavailable`` here, a provider's error answer ``OAuthRefused``.

These go to the URLs an operator registered (an admin-only setting), so they are not held to
the egress policy that user code is.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.oauth2.auth import ClientAuth

from sluice import errors
from sluice.domain import oauth
from sluice.domain.apps import OAuthConfig
from sluice.engine.outbound import tls

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 15.0


async def token(
    config: OAuthConfig, client_secret: str, form: dict[str, str], *, now_ms: int
) -> oauth.Tokens:
    """POST ``form`` to the token endpoint, the client authenticated as the app says
    (RFC 6749 §2.3.1: HTTP Basic or form fields, by Authlib's ``ClientAuth``)."""
    method = "client_secret_basic" if config.client_auth == "basic" else "client_secret_post"
    _, headers, body = ClientAuth(config.client_id or "", client_secret, method).prepare(
        "POST",
        config.token_url,
        # GitHub answers form-encoded unless asked for JSON.
        {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"},
        urlencode(form),
    )
    answer = await _send("POST", config.token_url, content=body.encode(), headers=headers)
    if answer.status_code >= 500:
        raise errors.OAuthUnavailable(
            f"the token endpoint {config.token_url} answered {answer.status_code}"
        )
    return oauth.read_tokens(_json(answer, config.token_url), now_ms)


async def user_uid(config: OAuthConfig, tokens: oauth.Tokens) -> str | None:
    """The provider's id of the user: from the user-info endpoint when the app has one, else
    from the token response (Slack's ``authed_user.id``)."""
    if config.user_info_url is None:
        return oauth.uid_of(tokens.raw, config.uid_field)
    answer = await _send(
        "GET",
        config.user_info_url,
        headers={
            "Authorization": f"Bearer {tokens.access_token}",
            "Accept": "application/json",
        },
    )
    if answer.status_code != 200:
        raise errors.OAuthUnavailable(
            f"the user-info endpoint {config.user_info_url} answered {answer.status_code}"
        )
    return oauth.uid_of(_json(answer, config.user_info_url), config.uid_field)


async def _send(method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        async with httpx.AsyncClient(
            timeout=TIMEOUT_SECONDS, follow_redirects=False, verify=tls.context()
        ) as client:
            return await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        log.warning("oauth provider unreachable", extra={"action": "oauth", "url": url})
        raise errors.OAuthUnavailable(f"{url} could not be reached: {exc}") from exc


def _json(answer: httpx.Response, url: str) -> Any:
    try:
        return answer.json()
    except ValueError as exc:
        raise errors.OAuthUnavailable(
            f"{url} answered {answer.status_code} with a body that is not JSON"
        ) from exc
