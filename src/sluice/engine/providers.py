"""Sluice's requests to OAuth 2 providers: the token endpoint (a code or a refresh token) and
the user-info endpoint (who connected). Network failures become ``OAuthUnavailable`` here, a
provider's error answer ``OAuthRefused``.

These go to the URLs an operator registered (an admin-only setting), so they are not held to
the egress policy that user code is.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from sluice import errors
from sluice.domain import oauth
from sluice.domain.apps import OAuthConfig

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 15.0


async def token(
    config: OAuthConfig, client_secret: str, form: dict[str, str], *, now_ms: int
) -> oauth.Tokens:
    """POST ``form`` to the token endpoint, the client authenticated as the app says."""
    body = dict(form)
    auth: tuple[str, str] | None = None
    if config.client_auth == "basic":
        auth = (config.client_id or "", client_secret)
    else:
        body.update(client_id=config.client_id or "", client_secret=client_secret)
    answer = await _send(
        "POST",
        config.token_url,
        data=body,
        auth=auth,
        # GitHub answers form-encoded unless asked for JSON.
        headers={"Accept": "application/json"},
    )
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
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False) as client:
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
