"""OAuth connections under way (``oauth_states``): what the callback needs to finish one.

The ``state`` parameter is a bearer secret that travels in the browser's URLs: only its
SHA-256 is stored, and a state is taken once (deleted as it is read), so a replayed callback
finds nothing. A state is bound once to the browser that opened its start link
(``browser_hash``), and only that browser's callback may take it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.crypto import Cipher
from sluice.storage.tables import oauth_states as t


@dataclass(frozen=True)
class Pending:
    owner_id: str
    app: str
    name: str | None
    verifier: str | None
    return_to: str | None
    expires_at_ms: int
    #: ``domain.oauth.browser_hash`` of the browser that opened the start link, if one did.
    browser_hash: str | None = None


def _hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _aad(state_hash: str) -> str:
    return f"oauth_states:{state_hash}:verifier"


async def create(
    conn: AsyncConnection, cipher: Cipher, state: str, pending: Pending, *, now_ms: int
) -> None:
    """Store a new connection, and forget the ones whose time ran out."""
    await conn.execute(t.delete().where(t.c.expires_at_ms <= now_ms))
    key = _hash(state)
    await conn.execute(
        t.insert().values(
            state_hash=key,
            owner_id=pending.owner_id,
            app=pending.app,
            name=pending.name,
            verifier=None
            if pending.verifier is None
            else cipher.encrypt(pending.verifier, _aad(key)),
            return_to=pending.return_to,
            expires_at_ms=pending.expires_at_ms,
        )
    )


async def peek(conn: AsyncConnection, cipher: Cipher, state: str, *, now_ms: int) -> Pending | None:
    """The connection ``state`` names, left in place; None when unknown, used or expired."""
    key = _hash(state)
    row = (await conn.execute(sa.select(t).where(t.c.state_hash == key))).first()
    if row is None or row.expires_at_ms <= now_ms:
        return None
    return _pending(row, cipher, key)


async def bind(conn: AsyncConnection, state: str, browser_hash: str, *, now_ms: int) -> bool:
    """Tie the connection to a browser, once: False when another browser opened it first (or
    it is gone)."""
    done = await conn.execute(
        t.update()
        .where(
            t.c.state_hash == _hash(state),
            t.c.browser_hash.is_(None),
            t.c.expires_at_ms > now_ms,
        )
        .values(browser_hash=browser_hash)
    )
    return bool(done.rowcount)


async def take(conn: AsyncConnection, cipher: Cipher, state: str, *, now_ms: int) -> Pending | None:
    """The connection ``state`` names, removed; None when unknown, used or expired."""
    key = _hash(state)
    row = (await conn.execute(sa.select(t).where(t.c.state_hash == key))).first()
    if row is None:
        return None
    deleted = await conn.execute(t.delete().where(t.c.state_hash == key))
    if not deleted.rowcount or row.expires_at_ms <= now_ms:
        return None  # another callback took it first, or too late
    return _pending(row, cipher, key)


def _pending(row: Any, cipher: Cipher, key: str) -> Pending:
    return Pending(
        owner_id=row.owner_id,
        app=row.app,
        name=row.name,
        verifier=None if row.verifier is None else cipher.decrypt(row.verifier, _aad(key)),
        return_to=row.return_to,
        expires_at_ms=row.expires_at_ms,
        browser_hash=row.browser_hash,
    )
