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
from sluice.storage.tables import connected_accounts as t


@dataclass(frozen=True)
class ConnectedAccount:
    id: str
    owner_id: str
    app: str
    name: str | None
    credential_keys: list[str]
    created_at: int
    updated_at: int

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "app": self.app,
            "name": self.name,
            # The names of the fields, never their values.
            "credential_fields": self.credential_keys,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


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
        )
    )
    return ConnectedAccount(account_id, owner_id, app, name, sorted(credentials), now_s, now_s)


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
        row.id, row.owner_id, row.app, row.name, keys, row.created_at, row.updated_at
    )
