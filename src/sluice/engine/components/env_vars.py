"""An account's environment variables: what its workflows' code steps read in ``process.env``
and its action steps' props may name (``{{process.env.NAME}}``). Sources and actions never
read them (the requirement: "Environment variables are not readable inside sources or
actions"); the runner empties ``process.env`` while an action step runs.

Values are encrypted at rest (bound to the account and the name) and never shown again: the
API lists names. A run reads them at most once a second per account in a process (a change
made through this process applies at once; another process sees it within that second).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.clock import Clock
from sluice.crypto import Cipher
from sluice.domain import text
from sluice.storage import env_vars as store

#: Variables per account, at most.
MAX_ENV_VARS = 200
_TTL_MS = 1000


def _aad(owner_id: str, name: str) -> str:
    return f"env_var:{owner_id}:{name}"


class EnvVars:
    def __init__(self, db: AsyncEngine, cipher: Cipher, clock: Clock) -> None:
        self.db, self.cipher, self.clock = db, cipher, clock
        self._cached: dict[str, tuple[int, dict[str, str]]] = {}

    async def set(self, owner_id: str, name: str, value: str) -> int:
        """Set ``name``; its ``updated_at``."""
        text.check_env_var(name, value)
        now_s = self.clock.now_ms() // 1000
        async with self.db.begin() as conn:
            known = dict(await store.names(conn, owner_id))
            if name not in known and len(known) >= MAX_ENV_VARS:
                raise errors.Conflict(
                    f"an account has at most {MAX_ENV_VARS} environment variables", field="name"
                )
            sealed = self.cipher.encrypt(value, _aad(owner_id, name))
            await store.put(conn, owner_id, name, sealed, now_s)
        self._cached.pop(owner_id, None)
        return now_s

    async def delete(self, owner_id: str, name: str) -> None:
        async with self.db.begin() as conn:
            if not await store.delete(conn, owner_id, name):
                raise errors.NotFound(f"no environment variable {name!r}", field="name")
        self._cached.pop(owner_id, None)

    async def names(self, owner_id: str) -> list[tuple[str, int]]:
        """``(name, updated_at)`` of each, by name: never the values."""
        async with self.db.connect() as conn:
            return await store.names(conn, owner_id)

    async def values(self, owner_id: str) -> dict[str, str]:
        """The decrypted variables, for a run's ``process.env``."""
        now_ms = self.clock.now_ms()
        held = self._cached.get(owner_id)
        if held is not None and held[0] > now_ms:
            return dict(held[1])
        async with self.db.connect() as conn:
            sealed = await store.values(conn, owner_id)
        found = {k: self.cipher.decrypt(v, _aad(owner_id, k)) for k, v in sealed.items()}
        if len(self._cached) > 10_000:
            self._cached.clear()
        self._cached[owner_id] = (now_ms + _TTL_MS, found)
        return dict(found)
