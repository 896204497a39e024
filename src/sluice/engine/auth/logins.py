"""Browser logins: passwords, sessions, and the API keys page's keys. The owner account of a
fresh install is made by ``Services.create_owner``, beside ``Services.create_account``.
Passwords are hashed off the event loop (argon2 takes tens of ms)."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, passwords
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import http_events
from sluice.domain.accounts import Account, KeyInfo
from sluice.domain.http_events import Bucket
from sluice.storage import accounts, sessions

#: How long a browser stays logged in without logging in again.
SESSION_TTL_S = 14 * 24 * 3600
#: Wrong passwords for one username from one address: this many at once, then one a minute.
#: Keyed by both, so guessing from one address cannot lock the user out from another.
LOGIN_BURST = 10
LOGIN_RATE = 1 / 60
#: Usernames and addresses remembered at most (a spray of names must not grow memory).
MAX_REMEMBERED = 10_000


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
        self._failed: dict[tuple[str, str], Bucket] = {}

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

    async def login(self, identifier: str, password: str, *, client: str = "") -> str:
        """A session token for the account whose username or e-mail and password match
        (``client``: the address the attempt came from, for the wrong-password throttle)."""
        key, now_ms = (identifier.strip().lower(), client), self.clock.now_ms()
        held = self._failed.get(key)
        taken, wait_ms = http_events.take(held, now_ms, rate=LOGIN_RATE, burst=LOGIN_BURST)
        if held is not None and wait_ms:
            raise errors.RateLimited(
                "too many wrong passwords for this username from your address; try again in "
                f"{-(-wait_ms // 1000)} s",
                retry_after_seconds=-(-wait_ms // 1000),
            )
        async with self.db.connect() as conn:
            found = await accounts.find_login(conn, identifier.strip())
        # The same work whether or not the account exists: no timing oracle for usernames
        # (the dummy hash is made at the first login of either kind).
        dummy = await asyncio.to_thread(passwords.dummy_hash)
        stored = found[1] if found else dummy
        ok = await asyncio.to_thread(passwords.verify, stored, password[: passwords.MAX_LENGTH])
        if found is None or not ok:
            self._remember(key, taken, now_ms)
            raise errors.Unauthorized("wrong username, e-mail or password")
        self._failed.pop(key, None)
        async with self.db.begin() as conn:
            return await sessions.create(
                conn, found[0].id, now_s=self._now_s(), ttl_s=SESSION_TTL_S
            )

    def _remember(self, key: tuple[str, str], bucket: Bucket, now_ms: int) -> None:
        self._failed[key] = bucket
        if len(self._failed) > MAX_REMEMBERED:  # forget the refilled, then the oldest
            for old in [k for k, b in self._failed.items() if self._refilled(b, now_ms)]:
                del self._failed[old]
            while len(self._failed) > MAX_REMEMBERED:
                del self._failed[next(iter(self._failed))]

    @staticmethod
    def _refilled(bucket: Bucket, now_ms: int) -> bool:
        return http_events.is_full(bucket, now_ms, rate=LOGIN_RATE, burst=LOGIN_BURST)

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
