"""Connected accounts (``apn_``): the credentials an app prop reads as ``$auth``.

Credentials are a JSON object encrypted with AES-GCM bound to the row; the API never returns
them, and they reach Node only in the invocation that needs them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.crypto import Cipher
from sluice.domain.apps import ConnectedAccount
from sluice.storage.tables import connected_accounts as t


@dataclass(frozen=True)
class TokenRow:
    """What a refresh reads and decides on (``engine/auth/credentials.py``)."""

    id: str
    app: str
    name: str | None
    credentials: dict[str, Any]
    expires_at_ms: int | None
    reconnect_reason: str | None
    refresh_lease_ms: int | None
    #: When its tokens were stored (``updated_at``: only a connection or a refresh writes it),
    #: in ms: the token's life is ``expires_at_ms - issued_at_ms``.
    issued_at_ms: int


def _aad(account_id: str) -> str:
    return f"connected_accounts:{account_id}:credentials"


async def create(
    conn: AsyncConnection,
    cipher: Cipher,
    *,
    owner_id: str,
    app: str,
    name: str | None,
    credentials: dict[str, Any],
    now_s: int,
    provider_uid: str | None = None,
    expires_at_ms: int | None = None,
) -> ConnectedAccount:
    account_id = ids.new_id("apn")
    token = cipher.encrypt(json.dumps(credentials), _aad(account_id))
    await conn.execute(
        t.insert().values(
            id=account_id,
            owner_id=owner_id,
            app=app,
            name=name,
            credentials=token,
            created_at=now_s,
            updated_at=now_s,
            provider_uid=provider_uid,
            expires_at_ms=expires_at_ms,
        )
    )
    return ConnectedAccount(
        account_id,
        owner_id,
        app,
        name,
        sorted(credentials),
        now_s,
        now_s,
        provider_uid,
        expires_at_ms,
    )


async def find_identity(conn: AsyncConnection, owner_id: str, app: str, uid: str) -> str | None:
    """The account of ``owner_id`` already connected as the provider's user ``uid``."""
    row = (
        await conn.execute(
            sa.select(t.c.id)
            .where(t.c.owner_id == owner_id, t.c.app == app, t.c.provider_uid == uid)
            .order_by(t.c.created_at, t.c.id)
        )
    ).first()
    return row.id if row else None


async def token_row(
    conn: AsyncConnection, cipher: Cipher, owner_id: str, account_id: str
) -> TokenRow | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.id == account_id, t.c.owner_id == owner_id))
    ).first()
    if row is None:
        return None
    return TokenRow(
        row.id,
        row.app,
        row.name,
        json.loads(cipher.decrypt(row.credentials, _aad(row.id))),
        row.expires_at_ms,
        row.reconnect_reason,
        row.refresh_lease_ms,
        int(row.updated_at) * 1000,
    )


async def take_lease(
    conn: AsyncConnection,
    account_id: str,
    *,
    holder: str,
    seen_expires_at_ms: int | None,
    now_ms: int,
    until_ms: int,
) -> bool:
    """Compare-and-set: this process refreshes the account when no live lease is held and the
    token is still the one it saw expiring (else another process refreshed it already)."""
    free = sa.or_(t.c.refresh_lease_ms.is_(None), t.c.refresh_lease_ms <= now_ms)
    result = await conn.execute(
        t.update()
        .where(
            t.c.id == account_id,
            free,
            _same_token(seen_expires_at_ms),
            t.c.reconnect_reason.is_(None),
        )
        .values(refresh_lease_ms=until_ms, refresh_holder=holder)
    )
    return bool(result.rowcount)


def _same_token(seen_expires_at_ms: int | None) -> sa.ColumnElement[bool]:
    """The row still holds the token that was read (its expiry stands for its version)."""
    if seen_expires_at_ms is None:
        return t.c.expires_at_ms.is_(None)
    return t.c.expires_at_ms == seen_expires_at_ms


async def store_tokens(
    conn: AsyncConnection,
    cipher: Cipher,
    account_id: str,
    credentials: dict[str, Any],
    *,
    expires_at_ms: int | None,
    now_s: int,
    replacing: TokenRow | None = None,
    provider_uid: str | None = None,
) -> bool:
    """New tokens (a refresh of the token ``replacing`` read, or a reconnect), the lease
    released and any reconnect reason cleared. False when a refresh finds the token it
    replaces already replaced (another process's lease ran out and it refreshed too)."""
    query = t.update().where(t.c.id == account_id)
    if replacing is not None:
        query = query.where(_same_token(replacing.expires_at_ms))
    values: dict[str, Any] = {
        "credentials": cipher.encrypt(json.dumps(credentials), _aad(account_id)),
        "expires_at_ms": expires_at_ms,
        "reconnect_reason": None,
        "refresh_lease_ms": None,
        "refresh_holder": None,
        "updated_at": now_s,
    }
    if provider_uid is not None:
        values["provider_uid"] = provider_uid
    result = await conn.execute(query.values(**values))
    return bool(result.rowcount)


async def release(
    conn: AsyncConnection, row: TokenRow, *, holder: str, reconnect_reason: str | None
) -> None:
    """Give the lease back after a failed refresh of ``row``'s token; a reason marks the
    account for reconnection, unless the token was replaced meanwhile."""
    values: dict[str, Any] = {"refresh_lease_ms": None, "refresh_holder": None}
    if reconnect_reason is not None:
        values["reconnect_reason"] = reconnect_reason
    ours = sa.or_(t.c.refresh_holder == holder, t.c.refresh_holder.is_(None))
    await conn.execute(
        t.update().where(t.c.id == row.id, _same_token(row.expires_at_ms), ours).values(**values)
    )


async def list_for(
    conn: AsyncConnection, cipher: Cipher, owner_id: str, app: str | None = None
) -> list[ConnectedAccount]:
    query = sa.select(t).where(t.c.owner_id == owner_id).order_by(t.c.created_at, t.c.id)
    if app:
        query = query.where(t.c.app == app)
    rows = (await conn.execute(query)).all()
    return [_account(r, cipher) for r in rows]


async def get(
    conn: AsyncConnection, cipher: Cipher, owner_id: str, account_id: str
) -> ConnectedAccount | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.id == account_id, t.c.owner_id == owner_id))
    ).first()
    return _account(row, cipher) if row else None


async def credentials(
    conn: AsyncConnection, cipher: Cipher, owner_id: str, account_id: str
) -> tuple[str, dict[str, Any]] | None:
    """(app slug, decrypted credentials) for an invocation, or None."""
    row = (
        await conn.execute(sa.select(t).where(t.c.id == account_id, t.c.owner_id == owner_id))
    ).first()
    if row is None:
        return None
    return row.app, json.loads(cipher.decrypt(row.credentials, _aad(row.id)))


async def delete(conn: AsyncConnection, owner_id: str, account_id: str) -> bool:
    result = await conn.execute(t.delete().where(t.c.id == account_id, t.c.owner_id == owner_id))
    return bool(result.rowcount)


def _account(row: Any, cipher: Cipher) -> ConnectedAccount:
    keys = sorted(json.loads(cipher.decrypt(row.credentials, _aad(row.id))))
    return ConnectedAccount(
        row.id,
        row.owner_id,
        row.app,
        row.name,
        keys,
        row.created_at,
        row.updated_at,
        row.provider_uid,
        row.expires_at_ms,
        row.reconnect_reason,
    )
