"""Accounts and their API keys.

A key reads ``slk_<key id>_<secret>``. Only ``sha256(secret)`` is stored, under the key id; a
256-bit random secret needs no slow KDF, and the comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors, ids
from sluice.domain import text
from sluice.domain.accounts import Account, KeyInfo
from sluice.storage.tables import accounts, api_keys

KEY_PREFIX = "slk"
#: The account that owns the core components Sluice ships
#: (``engine/components/core_components.py``): no password, no key, no e-mail, so nobody logs in
#: as it; not counted as a user.
SYSTEM_ID = "u_sluice"
SYSTEM_USERNAME = "sluice"


def from_row(row: Any) -> Account:
    return Account(
        row.id,
        row.username,
        row.email,
        bool(row.is_admin),
        row.created_at,
        bool(row.email_verified),
    )


async def _refuse_taken(
    conn: AsyncConnection, names: dict[str, str | None], account_id: str | None = None
) -> None:
    """``Conflict`` when another account's username or e-mail is one of ``names`` (``{field:
    value}``), compared without case: a login names an account by either, so two accounts
    sharing one would lock the newer one out."""
    wanted = {field: v.strip().lower() for field, v in names.items() if v}
    if not wanted:
        return
    values = list(wanted.values())
    query = sa.select(sa.func.lower(accounts.c.username), sa.func.lower(accounts.c.email)).where(
        sa.or_(
            sa.func.lower(accounts.c.username).in_(values),
            sa.func.lower(accounts.c.email).in_(values),
        )
    )
    if account_id is not None:
        query = query.where(accounts.c.id != account_id)
    taken = {v for row in (await conn.execute(query)).all() for v in row if v}
    for field, value in wanted.items():
        if value in taken:
            raise errors.Conflict(
                f"{field} {names[field]!r} is taken: another account's username or e-mail",
                field=field,
            )


async def create(
    conn: AsyncConnection, *, username: str, email: str | None, now_s: int, is_admin: bool = False
) -> Account:
    if email is not None:
        text.check_email_address(email)
    if username.strip().lower() == (email or "").strip().lower():
        raise errors.InvalidRequest("username and e-mail must differ", field="username")
    await _refuse_taken(conn, {"username": username, "email": email})
    # An address the operator gives at creation counts as verified; one the account sets
    # itself later does not (``set_email``).
    verified = email is not None
    account = Account(ids.new_id("u"), username, email, is_admin, now_s, verified)
    await conn.execute(
        accounts.insert().values(
            id=account.id,
            username=username,
            email=email,
            is_admin=is_admin,
            created_at=now_s,
            email_verified=verified,
        )
    )
    return account


async def get(conn: AsyncConnection, account_id: str) -> Account | None:
    row = (await conn.execute(sa.select(accounts).where(accounts.c.id == account_id))).first()
    return from_row(row) if row else None


async def create_key(conn: AsyncConnection, account_id: str, *, now_s: int) -> str:
    """Create an API key and return it; this is the only time it exists in clear."""
    key_id = ids.random_token(10)
    secret = ids.random_token(40)
    await conn.execute(
        api_keys.insert().values(
            id=key_id, account_id=account_id, secret_hash=_hash(secret), created_at=now_s
        )
    )
    return f"{KEY_PREFIX}_{key_id}_{secret}"


_AUTHENTICATE = (
    sa.select(api_keys.c.secret_hash, api_keys.c.revoked_at, accounts)
    .join(accounts, accounts.c.id == api_keys.c.account_id)
    .where(api_keys.c.id == sa.bindparam("key_id"))
)


def authenticate(conn: Connection, api_key: str) -> Account | None:
    """The account owning ``api_key``, or None for a malformed, unknown or revoked key.

    A sync function: every request runs it, through ``database.Reader``."""
    parts = api_key.split("_")
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        return None
    _, key_id, secret = parts
    row = conn.execute(_AUTHENTICATE, {"key_id": key_id}).first()
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(row.secret_hash, _hash(secret)):
        return None
    return from_row(row)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def set_email(conn: AsyncConnection, account_id: str, email: str | None) -> None:
    """Change the address; a new one is not verified until its link is followed."""
    if email is not None:
        text.check_email_address(email)
        await _refuse_taken(conn, {"email": email}, account_id)
    changed = sa.func.coalesce(sa.func.lower(accounts.c.email), "") != (email or "").lower()
    await conn.execute(
        accounts.update()
        .where(accounts.c.id == account_id)
        .values(
            email=email,
            email_verified=sa.case((changed, sa.false()), else_=accounts.c.email_verified),
        )
    )


async def mark_verified(conn: AsyncConnection, account_id: str, email: str) -> bool:
    """Mark the account's address verified if it is still ``email``; False when it changed."""
    result = await conn.execute(
        accounts.update()
        .where(accounts.c.id == account_id, sa.func.lower(accounts.c.email) == email.lower())
        .values(email_verified=True)
    )
    return bool(result.rowcount)


async def count(conn: AsyncConnection) -> int:
    """The people's accounts (the system account left out)."""
    query = sa.select(sa.func.count()).select_from(accounts).where(accounts.c.id != SYSTEM_ID)
    return int((await conn.execute(query)).scalar_one())


async def ensure_system(conn: AsyncConnection, *, now_s: int) -> None:
    """Create the system account if it is not there yet (the caller's transaction; a
    process racing another one gets an ``sa.exc.IntegrityError``, and may ignore it)."""
    found = await conn.execute(sa.select(accounts.c.id).where(accounts.c.id == SYSTEM_ID))
    if found.first() is None:
        await conn.execute(
            accounts.insert().values(
                id=SYSTEM_ID, username=SYSTEM_USERNAME, email=None, is_admin=False, created_at=now_s
            )
        )


async def set_password_hash(conn: AsyncConnection, account_id: str, password_hash: str) -> None:
    await conn.execute(
        accounts.update().where(accounts.c.id == account_id).values(password_hash=password_hash)
    )


async def find_login(conn: AsyncConnection, identifier: str) -> tuple[Account, str] | None:
    """The oldest account with a password whose username or e-mail is ``identifier``, and its
    password hash."""
    row = (
        await conn.execute(
            sa.select(accounts)
            .where(
                sa.or_(accounts.c.username == identifier, accounts.c.email == identifier),
                accounts.c.password_hash.is_not(None),
            )
            .order_by(accounts.c.created_at, accounts.c.id)
            .limit(1)
        )
    ).first()
    return (from_row(row), row.password_hash) if row else None


async def name_key(conn: AsyncConnection, account_id: str, key_id: str, name: str) -> None:
    await conn.execute(
        api_keys.update()
        .where(api_keys.c.id == key_id, api_keys.c.account_id == account_id)
        .values(name=name)
    )


async def list_keys(conn: AsyncConnection, account_id: str) -> list[KeyInfo]:
    rows = await conn.execute(
        sa.select(api_keys)
        .where(api_keys.c.account_id == account_id)
        .order_by(api_keys.c.created_at.desc(), api_keys.c.id)
    )
    return [KeyInfo(r.id, r.name, r.created_at, r.last_used_at, r.revoked_at) for r in rows.all()]


async def revoke_key(conn: AsyncConnection, account_id: str, key_id: str, *, now_s: int) -> bool:
    result = await conn.execute(
        api_keys.update()
        .where(
            api_keys.c.id == key_id,
            api_keys.c.account_id == account_id,
            api_keys.c.revoked_at.is_(None),
        )
        .values(revoked_at=now_s)
    )
    return result.rowcount > 0


#: Jail uids are ``base + n`` with ``n`` below this (``SandboxConfig.uid_base``).
JAIL_UIDS = 1 << 24


async def jail_uid(db: AsyncEngine, account_id: str, base: int) -> int | None:
    """The uid ``account_id``'s jails run under, assigned and stored on first need (None when
    there is no such account): a hash of the id, then the next free one. Unique in the
    database, so no two accounts share one in any process; a process racing another for the
    same uid gets an ``sa.exc.IntegrityError`` and looks again."""
    start = int.from_bytes(hashlib.sha256(account_id.encode()).digest()[:4], "big") % JAIL_UIDS
    for _ in range(16):
        try:
            async with db.begin() as conn:
                row = (
                    await conn.execute(
                        sa.select(accounts.c.jail_uid).where(accounts.c.id == account_id)
                    )
                ).first()
                if row is None:
                    return None
                if row.jail_uid is not None:
                    return int(row.jail_uid)
                n = start
                while (
                    await conn.execute(
                        sa.select(accounts.c.id).where(accounts.c.jail_uid == base + n)
                    )
                ).first() is not None:
                    n = (n + 1) % JAIL_UIDS
                done = await conn.execute(
                    accounts.update()
                    .where(accounts.c.id == account_id, accounts.c.jail_uid.is_(None))
                    .values(jail_uid=base + n)
                )
                if done.rowcount:
                    return base + n
        except sa.exc.IntegrityError:
            continue  # another process took that uid (or assigned this account's) meanwhile
    raise errors.Conflict(f"no jail uid could be stored for {account_id}")
