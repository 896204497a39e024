"""Browser logins: passwords, sessions, and the API keys page's keys. The owner account of a
fresh install is made by ``Platform.create_owner``, beside ``create_account``. Passwords are
hashed off the event loop (argon2 takes tens of ms)."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, passwords
from sluice.clock import Clock
from sluice.config import Settings
from sluice.storage import accounts, sessions
from sluice.storage.accounts import Account, KeyInfo

#: How long a browser stays logged in without logging in again.
SESSION_TTL_S = 14 * 24 * 3600


def _checked(password: str) -> str:
    problem = passwords.problem(password)
    if problem is not None:
        raise errors.InvalidRequest(problem, field="password")
    return password


async def hash_new_password(password: str) -> str:
    """The argon2id hash of a password being set (``InvalidRequest`` on ``password`` when it
    is too short or too long), computed off the event loop."""
    return await asyncio.to_thread(passwords.hash_password, _checked(password))


class Logins:
    def __init__(self, db: AsyncEngine, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    def _now_s(self) -> int:
        return self.clock.now_ms() // 1000

    async def needs_owner(self) -> bool:
        """True on a fresh install: no account yet, so the first visitor creates the owner."""
        async with self.db.connect() as conn:
            return await accounts.count(conn) == 0

    async def set_password(self, account_id: str, password: str) -> None:
        password_hash = await hash_new_password(password)
        async with self.db.begin() as conn:
            await accounts.set_password_hash(conn, account_id, password_hash)

    async def login(self, identifier: str, password: str) -> str:
        """A session token for the account whose username or e-mail and password match."""
        async with self.db.connect() as conn:
            found = await accounts.find_login(conn, identifier.strip())
        # The same work whether or not the account exists: no timing oracle for usernames.
        stored = found[1] if found else passwords.DUMMY_HASH
        ok = await asyncio.to_thread(passwords.verify, stored, password[: passwords.MAX_LENGTH])
        if found is None or not ok:
            raise errors.Unauthorized("wrong username, e-mail or password")
        async with self.db.begin() as conn:
            return await sessions.create(
                conn, found[0].id, now_s=self._now_s(), ttl_s=SESSION_TTL_S
            )

    async def session_account(self, token: str) -> Account | None:
        async with self.db.connect() as conn:
            return await sessions.account(conn, token, now_s=self._now_s())

    async def logout(self, token: str) -> None:
        async with self.db.begin() as conn:
            await sessions.delete(conn, token)

    # ---- the API keys page ------------------------------------------------------------------

    async def keys(self, account_id: str) -> list[KeyInfo]:
        async with self.db.connect() as conn:
            return await accounts.list_keys(conn, account_id)

    async def create_key(self, account_id: str, name: str) -> str:
        """A new named API key, returned this once in clear."""
        name = name.strip()
        if not name or len(name) > 200:
            raise errors.InvalidRequest(
                "give the key a name (at most 200 characters)", field="name"
            )
        async with self.db.begin() as conn:
            key = await accounts.create_key(conn, account_id, now_s=self._now_s())
            await accounts.name_key(conn, account_id, key.split("_")[1], name)
        return key

    async def revoke_key(self, account_id: str, key_id: str) -> None:
        async with self.db.begin() as conn:
            if not await accounts.revoke_key(conn, account_id, key_id, now_s=self._now_s()):
                raise errors.NotFound(f"no active API key {key_id}")
