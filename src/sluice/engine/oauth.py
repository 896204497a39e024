"""Connecting an OAuth 2 account: the authorization code flow with ``state`` and PKCE.

1. ``start``: a random ``state`` (stored hashed, with the PKCE verifier, for
   ``STATE_TTL_MS``) and the provider's authorize URL, which the browser opens.
2. The provider redirects to ``SLUICE_PUBLIC_URL/oauth/callback?code=…&state=…``.
3. ``finish``: the state is taken (once), the code exchanged with the verifier, the user's id
   asked for, and the ``apn_`` account created, or updated when the same provider user was
   connected before (reconnecting never duplicates an account).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.crypto import Cipher
from sluice.domain import oauth
from sluice.domain.apps import App, OAuthConfig
from sluice.engine import providers
from sluice.engine.app_catalog import AppCatalog
from sluice.storage import apps, oauth_states
from sluice.storage.apps import ConnectedAccount


@dataclass(frozen=True)
class Started:
    authorize_url: str
    state: str
    redirect_uri: str
    expires_at_ms: int


@dataclass(frozen=True)
class Finished:
    account: ConnectedAccount
    #: Where the operator's UI asked the browser to go back to (a path of this server).
    return_to: str | None
    reconnected: bool


class OAuthConnect:
    def __init__(
        self,
        db: AsyncEngine,
        cipher: Cipher,
        clock: Clock,
        catalog: AppCatalog,
        public_url: str | Callable[[], str],
    ) -> None:
        self.db = db
        self.cipher = cipher
        self.clock = clock
        self.catalog = catalog
        #: Sluice's public URL, or what tells it now (the request's URL when none is set).
        self.public_url = public_url

    @property
    def redirect_uri(self) -> str:
        base = self.public_url if isinstance(self.public_url, str) else self.public_url()
        return oauth.redirect_uri(base)

    async def start(
        self, owner_id: str, slug: str, *, name: str | None, return_to: str | None
    ) -> Started:
        app = await self.catalog.get(slug)
        config = _connectable(app)
        if return_to is not None and not _local_path(return_to):
            raise errors.InvalidRequest(
                "return_to is a path on this server, e.g. /accounts", field="return_to"
            )
        state = ids.random_token(43)
        verifier = ids.random_token(64) if config.pkce else None
        now_ms = self.clock.now_ms()
        pending = oauth_states.Pending(
            owner_id, slug, name, verifier, return_to, now_ms + oauth.STATE_TTL_MS
        )
        async with self.db.begin() as conn:
            await oauth_states.create(conn, self.cipher, state, pending, now_ms=now_ms)
        url = oauth.authorize_url(
            config, redirect=self.redirect_uri, state=state, verifier=verifier
        )
        return Started(url, state, self.redirect_uri, pending.expires_at_ms)

    async def finish(self, params: dict[str, str]) -> Finished:
        """The provider's redirect: ``code`` and ``state``, or ``error``."""
        state = params.get("state") or ""
        async with self.db.begin() as conn:
            pending = await oauth_states.take(conn, self.cipher, state, now_ms=self.clock.now_ms())
        if pending is None:
            raise errors.OAuthRefused(
                "unknown, used or expired OAuth state: start the connection again"
            )
        if params.get("error"):
            raise errors.OAuthRefused(
                f"the provider answered {params['error']}"
                + (f": {params['error_description']}" if params.get("error_description") else "")
            )
        code = params.get("code")
        if not code:
            raise errors.OAuthRefused("the provider's redirect has no code")
        app = await self.catalog.get(pending.app)
        config = _connectable(app)
        secret = await self.catalog.client_secret(app.name_slug) or ""
        form = oauth.code_form(code, redirect=self.redirect_uri, verifier=pending.verifier)
        tokens = await providers.token(config, secret, form, now_ms=self.clock.now_ms())
        uid = await providers.user_uid(config, tokens)
        credentials = oauth.credentials(tokens, uid=uid, client_id=config.client_id, before=None)
        account, reconnected = await self._keep(pending, credentials, uid, tokens)
        return Finished(account, pending.return_to, reconnected)

    async def _keep(
        self,
        pending: oauth_states.Pending,
        credentials: dict[str, Any],
        uid: str | None,
        tokens: oauth.Tokens,
    ) -> tuple[ConnectedAccount, bool]:
        now_s = self.clock.now_ms() // 1000
        async with self.db.begin() as conn:
            existing = (
                await apps.find_identity(conn, pending.owner_id, pending.app, uid)
                if uid is not None
                else None
            )
            if existing is not None:
                await apps.store_tokens(
                    conn,
                    self.cipher,
                    existing,
                    credentials,
                    expires_at_ms=tokens.expires_at_ms,
                    now_s=now_s,
                    provider_uid=uid,
                )
                found = await apps.get(conn, self.cipher, pending.owner_id, existing)
                assert found is not None
                return found, True
            created = await apps.create(
                conn,
                self.cipher,
                owner_id=pending.owner_id,
                app=pending.app,
                name=pending.name,
                credentials=credentials,
                now_s=now_s,
                provider_uid=uid,
                expires_at_ms=tokens.expires_at_ms,
            )
            return created, False


def _local_path(value: str) -> bool:
    """A path on this server, never another host: browsers read ``//x`` and ``/\\x`` as one."""
    return (
        value.startswith("/")
        and not value.startswith("//")
        and "\\" not in value
        and value.isprintable()
    )


def _connectable(app: App) -> OAuthConfig:
    if app.auth_type != "oauth" or app.oauth is None:
        raise errors.InvalidRequest(
            f"{app.name_slug} is a {app.auth_type} app: connect it with POST /v1/accounts "
            "and its fields",
            field="app",
        )
    if not app.connectable:
        raise errors.Conflict(
            f"{app.name_slug} has no OAuth client id and secret yet: an operator sets them "
            f"(sluice apps set {app.name_slug} --client-id … --client-secret …)"
        )
    return app.oauth
