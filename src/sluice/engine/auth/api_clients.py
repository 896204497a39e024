"""OAuth API clients: an account's ``client_id``/``client_secret`` pairs, exchanged for
short-lived bearer tokens by the ``client_credentials`` grant (RFC 6749 §4.4), as Pipedream's
``POST /v1/oauth/token`` does. A token authorizes every ``/v1`` route an API key does, as its
client's account, until it expires (``SLUICE_OAUTH_TOKEN_TTL_SECONDS``, Pipedream's 3600) or
its client is deleted; it cannot manage OAuth clients (an API key or a browser session can).

The secret is shown once, at creation; only sha256 digests of secrets and tokens are stored
(``storage/oauth_clients.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.domain.accounts import Account
from sluice.domain.oauth_clients import OAuthClient
from sluice.storage import database
from sluice.storage import oauth_clients as store

#: The client secret's prefix: a leaked one is recognisable in a secret scanner.
SECRET_PREFIX = "slcs"  # noqa: S105 - a prefix, not a secret
MAX_NAME = 200


@dataclass(frozen=True)
class Issued:
    access_token: str
    expires_in: int
    created_at: int


class ApiClients:
    def __init__(
        self, db: AsyncEngine, reader: database.Reader, clock: Clock, ttl_seconds: int
    ) -> None:
        self.db = db
        self.reader = reader
        self.clock = clock
        self.ttl_seconds = max(1, ttl_seconds)

    async def create(self, account_id: str, name: object) -> tuple[OAuthClient, str]:
        """A new client of the account and its secret (shown this once)."""
        if name is None or name == "":
            name = "OAuth client"
        if not isinstance(name, str) or len(name) > MAX_NAME:
            raise errors.InvalidRequest(
                f"name must be a string of at most {MAX_NAME} characters", field="name"
            )
        client = OAuthClient(
            "oc_" + ids.random_token(24), account_id, name, self.clock.now_ms() // 1000
        )
        secret = f"{SECRET_PREFIX}_{ids.random_token(40)}"
        async with self.db.begin() as conn:
            await conn.run_sync(lambda c: store.create_sync(c, client, secret))
        return client, secret

    async def all(self, account_id: str) -> list[OAuthClient]:
        return await self.reader(lambda c: store.list_sync(c, account_id))

    async def delete(self, account_id: str, client_id: str) -> None:
        """Delete the client; its tokens stop working at once."""
        async with self.db.begin() as conn:
            found = await conn.run_sync(lambda c: store.delete_sync(c, account_id, client_id))
        if not found:
            raise errors.NotFound(f"no OAuth client {client_id!r} in this account")

    async def issue(self, client_id: str, secret: str) -> Issued | None:
        """A new token for valid client credentials; None for invalid ones."""
        now = self.clock.now_ms()
        token_id, token_secret = ids.random_token(12), ids.random_token(40)
        expires = now + self.ttl_seconds * 1000

        def transaction(conn: Connection) -> str | None:
            if store.check_sync(conn, client_id, secret) is None:
                return None
            return store.issue_sync(conn, client_id, token_id, token_secret, now, expires)

        async with self.db.begin() as conn:
            token = await conn.run_sync(transaction)
        if token is None:
            return None
        return Issued(token, self.ttl_seconds, now // 1000)

    async def revoke(self, client_id: str, secret: str, token: str) -> bool:
        """Revoke one of the client's tokens (RFC 7009); False for invalid client
        credentials."""

        def transaction(conn: Connection) -> bool:
            if store.check_sync(conn, client_id, secret) is None:
                return False
            store.revoke_sync(conn, client_id, token)
            return True

        async with self.db.begin() as conn:
            return await conn.run_sync(transaction)

    async def authenticate(self, token: str) -> Account | None:
        """The account an unexpired access token stands for."""
        now = self.clock.now_ms()
        return await self.reader(lambda c: store.authenticate_sync(c, token, now))
