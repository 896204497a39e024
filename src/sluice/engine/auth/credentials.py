"""The ``$auth`` of a connected account for an invocation, its OAuth token fresh.

Every invocation that reads an account (a source's run or hook, a workflow step, an action,
a prop's options) asks ``Credentials.auth``. An access token expiring within
``domain/oauth.refresh_margin_ms`` (5 minutes, or half its life when shorter) is refreshed
first, once, however many runs and processes
need it at the same moment:

- in this process, runs needing the same account wait on one lock;
- across processes, the refresh is a lease taken by compare-and-set on the account's row
  (``storage/apps.take_lease``): no transaction is held while the provider answers (on SQLite
  the one pooled connection would stall every write meanwhile). A process that finds the
  lease taken uses the current token while it is still valid, else waits for the holder.

A refresh the provider refuses (a revoked or rotated-away refresh token) marks the account
``reconnect_needed`` and raises ``ReconnectNeeded`` naming it; the invocation fails with that
error (a run's error, which reaches ``$errors``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.crypto import Cipher
from sluice.domain import oauth
from sluice.domain.apps import App
from sluice.engine.auth import providers
from sluice.engine.auth.app_catalog import AppCatalog
from sluice.storage import apps
from sluice.storage.apps import TokenRow

log = logging.getLogger(__name__)

#: What an invocation that reads an account may fail with: it fails the run, not the job.
CREDENTIAL_ERRORS = (errors.ReconnectNeeded, errors.OAuthUnavailable)
#: How often a process waiting for another's refresh looks again (real time: the other
#: process's refresh is a real network call).
_WAIT_SECONDS = 0.1


class Credentials:
    def __init__(self, db: AsyncEngine, cipher: Cipher, clock: Clock, catalog: AppCatalog) -> None:
        self.db = db
        self.cipher = cipher
        self.clock = clock
        self.catalog = catalog
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def auth(self, owner_id: str, account_id: str) -> tuple[str, dict[str, Any]] | None:
        """(app slug, ``$auth``) of ``owner_id``'s account, refreshed if it expires soon;
        None when there is no such account."""
        row = await self._read(owner_id, account_id)
        if row is None:
            return None
        if not _needs_refresh(row, self.clock.now_ms()):
            return row.app, row.credentials
        lock = self._locks.get(account_id)
        if lock is None:
            lock = self._locks[account_id] = asyncio.Lock()
        async with lock:
            return row.app, await self._fresh(owner_id, account_id)

    async def _read(self, owner_id: str, account_id: str) -> TokenRow | None:
        async with self.db.connect() as conn:
            return await apps.token_row(conn, self.cipher, owner_id, account_id)

    async def _fresh(self, owner_id: str, account_id: str) -> dict[str, Any]:
        lease_rounds = int(oauth.LEASE_MS / 1000 / _WAIT_SECONDS) + 1
        for _ in range(lease_rounds):
            row = await self._read(owner_id, account_id)
            if row is None:
                raise errors.NotFound(f"connected account {account_id} not found")
            now_ms = self.clock.now_ms()
            if not _needs_refresh(row, now_ms):
                return row.credentials  # refreshed meanwhile (by a run before this one)
            if row.reconnect_reason is not None:
                raise errors.ReconnectNeeded(_message(row, row.reconnect_reason))
            holder = ids.random_token(20)
            async with self.db.begin() as conn:
                taken = await apps.take_lease(
                    conn,
                    row.id,
                    holder=holder,
                    seen_expires_at_ms=row.expires_at_ms,
                    now_ms=now_ms,
                    until_ms=now_ms + oauth.LEASE_MS,
                )
            if taken:
                return await self._refresh(owner_id, row, holder)
            if row.expires_at_ms is not None and row.expires_at_ms > now_ms:
                return row.credentials  # another process refreshes; this token still works
            await asyncio.sleep(_WAIT_SECONDS)
        raise errors.OAuthUnavailable(
            f"connected account {account_id}: another process's token refresh did not finish"
        )

    async def _refresh(self, owner_id: str, row: TokenRow, holder: str) -> dict[str, Any]:
        """The refresh itself, under this process's lease."""
        try:
            app, tokens = await self._ask_provider(row)
        except (errors.OAuthRefused, errors.NotFound) as exc:
            async with self.db.begin() as conn:
                await apps.release(conn, row, holder=holder, reconnect_reason=exc.message)
            log.warning(
                "token refresh refused", extra={"action": "oauth_refresh", "account_id": row.id}
            )
            replaced = await self._replaced(owner_id, row)
            if replaced is not None:
                return replaced  # another process refreshed meanwhile (its lease, ours lapsed)
            raise errors.ReconnectNeeded(_message(row, exc.message)) from exc
        except errors.OAuthUnavailable as exc:
            async with self.db.begin() as conn:
                await apps.release(conn, row, holder=holder, reconnect_reason=None)
            raise errors.OAuthUnavailable(
                f"connected account {row.id} ({row.app}): its token could not be refreshed: "
                f"{exc.message}"
            ) from exc
        credentials = oauth.credentials(
            tokens,
            uid=None,
            client_id=app.oauth.client_id if app.oauth else None,
            before=row.credentials,
        )
        async with self.db.begin() as conn:
            kept = await apps.store_tokens(
                conn,
                self.cipher,
                row.id,
                credentials,
                expires_at_ms=tokens.expires_at_ms,
                now_s=self.clock.now_ms() // 1000,
                replacing=row,
            )
        log.info("token refreshed", extra={"action": "oauth_refresh", "account_id": row.id})
        if not kept:  # our lease ran out and another process refreshed: theirs are stored
            return await self._replaced(owner_id, row) or credentials
        return credentials

    async def _ask_provider(self, row: TokenRow) -> tuple[App, oauth.Tokens]:
        app = await self.catalog.get(row.app)
        refresh_token = row.credentials.get("oauth_refresh_token")
        if app.oauth is None or not refresh_token:
            raise errors.OAuthRefused(
                "its access token expired and there is no refresh token to renew it"
            )
        secret = await self.catalog.client_secret(row.app) or ""
        tokens = await providers.token(
            app.oauth, secret, oauth.refresh_form(str(refresh_token)), now_ms=self.clock.now_ms()
        )
        return app, tokens

    async def _replaced(self, owner_id: str, row: TokenRow) -> dict[str, Any] | None:
        """The credentials another process stored in place of ``row``'s token, if any."""
        now = await self._read(owner_id, row.id)
        if now is not None and now.expires_at_ms != row.expires_at_ms:
            return now.credentials
        return None


def _needs_refresh(row: TokenRow, now_ms: int) -> bool:
    return oauth.needs_refresh(
        expires_at_ms=row.expires_at_ms, now_ms=now_ms, issued_at_ms=row.issued_at_ms
    )


def _message(row: TokenRow, reason: str) -> str:
    named = f"{row.id} ({row.app}" + (f", {row.name!r})" if row.name else ")")
    return (
        f"connected account {named} needs reconnecting: {reason}. Reconnect it "
        f"(POST /v1/apps/{row.app}/connect) and run again"
    )
