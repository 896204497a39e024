"""Browser sessions: the cookie holds a random token, the table only its sha256."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.domain.accounts import Account
from sluice.storage import accounts
from sluice.storage.tables import accounts as accounts_table
from sluice.storage.tables import browser_sessions as t


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create(conn: AsyncConnection, account_id: str, *, now_s: int, ttl_s: int) -> str:
    """A new session for the account; its token, which exists in clear only in the cookie."""
    token = ids.random_token(43)
    await conn.execute(
        t.insert().values(
            id=_hash(token), account_id=account_id, created_at=now_s, expires_at=now_s + ttl_s
        )
    )
    # Expired sessions go when anyone logs in: no sweeper needed for a table this small.
    await conn.execute(t.delete().where(t.c.expires_at <= now_s))
    return token


async def account(conn: AsyncConnection, token: str, *, now_s: int) -> Account | None:
    """The account of a live session, or None (unknown, expired or logged out)."""
    row = (
        await conn.execute(
            sa.select(accounts_table)
            .join(t, t.c.account_id == accounts_table.c.id)
            .where(t.c.id == _hash(token), t.c.expires_at > now_s)
        )
    ).first()
    return accounts.from_row(row) if row else None


async def delete(conn: AsyncConnection, token: str) -> None:
    await conn.execute(t.delete().where(t.c.id == _hash(token)))
