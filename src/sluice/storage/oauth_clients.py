"""OAuth API clients of accounts and the bearer tokens they are issued
(``engine/auth/api_clients.py`` decides; this stores).

A client is ``(client_id, sha256(secret))``; a token is ``slo_<id>_<secret>``, stored as its id
and the sha256 of its secret, with its expiry. Secrets are random (≥ 190 bits), so a plain
sha256 is enough (no slow hash: nothing to guess). Deleting a client deletes its tokens.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sluice.domain.accounts import Account
from sluice.domain.oauth_clients import OAuthClient
from sluice.storage import accounts as account_store
from sluice.storage.tables import accounts, oauth_clients, oauth_tokens

#: The prefix of an OAuth access token (an API key's is ``slk``).
TOKEN_PREFIX = "slo"  # noqa: S105 - a prefix, not a secret


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _client(row: Any) -> OAuthClient:
    return OAuthClient(row.id, row.account_id, row.name, int(row.created_at))


def create_sync(conn: Connection, client: OAuthClient, secret: str) -> None:
    conn.execute(
        oauth_clients.insert().values(
            id=client.id,
            account_id=client.account_id,
            name=client.name,
            secret_hash=digest(secret),
            created_at=client.created_at,
        )
    )


def list_sync(conn: Connection, account_id: str) -> list[OAuthClient]:
    rows = conn.execute(
        sa.select(oauth_clients)
        .where(oauth_clients.c.account_id == account_id)
        .order_by(oauth_clients.c.created_at, oauth_clients.c.id)
    )
    return [_client(row) for row in rows]


def delete_sync(conn: Connection, account_id: str, client_id: str) -> bool:
    """Delete the account's client and its tokens; False when it has no such client."""
    owned = sa.and_(oauth_clients.c.id == client_id, oauth_clients.c.account_id == account_id)
    if conn.execute(sa.select(oauth_clients.c.id).where(owned)).first() is None:
        return False
    # Explicitly, not only by the foreign key's cascade: SQLite enforces it only with its pragma.
    conn.execute(oauth_tokens.delete().where(oauth_tokens.c.client_id == client_id))
    conn.execute(oauth_clients.delete().where(owned))
    return True


def check_sync(conn: Connection, client_id: str, secret: str) -> OAuthClient | None:
    """The client these credentials are, or None (unknown id, wrong secret: not told apart)."""
    row = conn.execute(sa.select(oauth_clients).where(oauth_clients.c.id == client_id)).first()
    if row is None or not hmac.compare_digest(row.secret_hash, digest(secret)):
        return None
    return _client(row)


def issue_sync(
    conn: Connection, client_id: str, token_id: str, secret: str, now_ms: int, expires_ms: int
) -> str:
    """Store a token for the client (its expired ones deleted first); the token."""
    conn.execute(
        oauth_tokens.delete().where(
            oauth_tokens.c.client_id == client_id, oauth_tokens.c.expires_ms <= now_ms
        )
    )
    conn.execute(
        oauth_tokens.insert().values(
            id=token_id,
            client_id=client_id,
            secret_hash=digest(secret),
            created_at=now_ms // 1000,
            expires_ms=expires_ms,
        )
    )
    return f"{TOKEN_PREFIX}_{token_id}_{secret}"


def _parts(token: str) -> tuple[str, str] | None:
    parts = token.split("_")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    return parts[1], parts[2]


def revoke_sync(conn: Connection, client_id: str, token: str) -> None:
    """Delete ``token`` if it is one of the client's (RFC 7009: anything else is no error)."""
    parts = _parts(token)
    if parts is None:
        return
    row = conn.execute(
        sa.select(oauth_tokens.c.secret_hash).where(
            oauth_tokens.c.id == parts[0], oauth_tokens.c.client_id == client_id
        )
    ).first()
    if row is not None and hmac.compare_digest(row.secret_hash, digest(parts[1])):
        conn.execute(oauth_tokens.delete().where(oauth_tokens.c.id == parts[0]))


_AUTHENTICATE = (
    sa.select(oauth_tokens.c.secret_hash, oauth_tokens.c.expires_ms, accounts)
    .join(oauth_clients, oauth_clients.c.id == oauth_tokens.c.client_id)
    .join(accounts, accounts.c.id == oauth_clients.c.account_id)
    .where(oauth_tokens.c.id == sa.bindparam("token_id"))
)


def is_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX + "_")


def authenticate_sync(conn: Connection, token: str, now_ms: int) -> Account | None:
    """The account an unexpired token of one of its clients stands for, else None."""
    parts = _parts(token)
    if parts is None:
        return None
    row = conn.execute(_AUTHENTICATE, {"token_id": parts[0]}).first()
    if row is None or row.expires_ms <= now_ms:
        return None
    if not hmac.compare_digest(row.secret_hash, digest(parts[1])):
        return None
    return account_store.from_row(row)
