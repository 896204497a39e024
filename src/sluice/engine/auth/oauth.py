"""Connecting an OAuth 2 account: the authorization code flow with ``state`` and PKCE.

1. ``start``: a random ``state`` (stored hashed, with the PKCE verifier, for
   ``STATE_TTL_MS``) and Sluice's start link for it (``/oauth/start?state=…``, the API's
   ``authorize_url``), which a browser opens.
2. ``opening`` / ``bind``: the browser that opens the link is asked whether it started the
   connection (it is told which Sluice account it connects to; a browser signed in to the web
   UI as that account is not asked), and is then bound to it: a random token in its
   ``sluice_oauth`` cookie, stored hashed, once. It goes on to the provider's authorize URL,
   which no one else is given. A connection the web UI starts is bound at ``start`` to the
   browser session that started it, and its link is the provider's URL: no start link exists
   for another browser to open first.
3. The provider redirects to ``SLUICE_PUBLIC_URL/oauth/callback?code=…&state=…``.
4. ``finish``: only in the bound browser (its cookie), the state is taken (once), the code
   exchanged with the verifier, the user's id asked for, and the ``apn_`` account created, or
   updated when the same provider user was connected before (reconnecting never duplicates
   an account).

The binding is what makes a leaked authorize URL harmless: approved in another browser (a
link sent to someone else, one found in a log), the callback is refused, so no one can
connect *their* provider account to a Sluice account that is not theirs without being shown
which account it is first.
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
from sluice.domain.apps import App, ConnectedAccount, OAuthConfig
from sluice.engine.auth import providers
from sluice.engine.auth.app_catalog import AppCatalog
from sluice.storage import accounts, apps, oauth_states


@dataclass(frozen=True)
class Started:
    authorize_url: str
    state: str
    redirect_uri: str
    expires_at_ms: int


@dataclass(frozen=True)
class Opening:
    """A start link opened in a browser: whose connection it is, for the page that asks."""

    owner_id: str
    username: str
    app: str
    app_name: str


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
    def base_url(self) -> str:
        return self.public_url if isinstance(self.public_url, str) else self.public_url()

    @property
    def redirect_uri(self) -> str:
        return oauth.redirect_uri(self.base_url)

    async def start(
        self,
        owner_id: str,
        slug: str,
        *,
        name: str | None,
        return_to: str | None,
        browser: str | None = None,
    ) -> Started:
        """A new connection and the link a browser opens for it. ``browser``: the
        ``sluice_oauth`` token of the signed-in browser that starts it (the web UI's Connect);
        then the connection is bound to that browser at once and the link is the provider's
        authorize URL itself, so no other browser can open or finish it. Without one (an API
        key, the CLI), the link is Sluice's start link, bound to the first browser that
        confirms it (``opening``/``bind``)."""
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
            if browser is not None:
                await oauth_states.bind(conn, state, oauth.browser_hash(browser), now_ms=now_ms)
        if browser is not None:
            link = oauth.authorize_url(
                config, redirect=self.redirect_uri, state=state, verifier=verifier
            )
        else:
            link = oauth.start_url(self.base_url, state)
        return Started(link, state, self.redirect_uri, pending.expires_at_ms)

    async def opening(self, state: str) -> Opening:
        """The connection a start link names, not yet opened by any browser."""
        async with self.db.connect() as conn:
            found = await oauth_states.peek(conn, self.cipher, state, now_ms=self.clock.now_ms())
            owner = await accounts.get(conn, found.owner_id) if found is not None else None
        if found is None or owner is None:
            raise errors.OAuthRefused(_UNKNOWN)
        if found.browser_hash is not None:
            raise errors.OAuthRefused(_OPENED)
        app = await self.catalog.get(found.app)
        return Opening(found.owner_id, owner.username, app.name_slug, app.name)

    async def bind(self, state: str, browser: str) -> str:
        """Tie the connection to the browser whose ``sluice_oauth`` cookie is ``browser``
        (once: a link opened already is refused); the provider's authorize URL, to go on to."""
        now_ms = self.clock.now_ms()
        async with self.db.begin() as conn:
            found = await oauth_states.peek(conn, self.cipher, state, now_ms=now_ms)
            if found is None:
                raise errors.OAuthRefused(_UNKNOWN)
            hashed = oauth.browser_hash(browser)
            if not await oauth_states.bind(conn, state, hashed, now_ms=now_ms):
                raise errors.OAuthRefused(_OPENED)
        config = _connectable(await self.catalog.get(found.app))
        return oauth.authorize_url(
            config, redirect=self.redirect_uri, state=state, verifier=found.verifier
        )

    async def finish(self, params: dict[str, str], browser: str | None) -> Finished:
        """The provider's redirect: ``code`` and ``state``, or ``error``; ``browser``: the
        ``sluice_oauth`` cookie it came with."""
        state = params.get("state") or ""
        async with self.db.begin() as conn:
            now_ms = self.clock.now_ms()
            found = await oauth_states.peek(conn, self.cipher, state, now_ms=now_ms)
            if found is not None and not oauth.bound(found.browser_hash, browser):
                # Left in place: the browser it was opened in may still finish it.
                raise errors.OAuthRefused(
                    "this connection was opened in another browser: finish it there, or start "
                    "it again from this one"
                )
            pending = await oauth_states.take(conn, self.cipher, state, now_ms=now_ms)
        if pending is None:
            raise errors.OAuthRefused(_UNKNOWN)
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


_UNKNOWN = "unknown, used or expired OAuth state: start the connection again"
_OPENED = (
    "this connection link was opened already (it works once, in one browser): start the "
    "connection again"
)


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
