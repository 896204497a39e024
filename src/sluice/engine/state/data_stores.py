"""Account data stores: managed over ``/v1/data_stores`` and the CLI, and used by components'
``data_store`` props.

A component's calls (``await this.store.get(k)``, ``set``, …) reach Python one at a time, as a
``store`` message of the runner protocol (docs/runner-protocol.md): ``runner_call`` answers each
with one short transaction, bound to the account of the invocation that made it. So two runs
that write one store at the same time each see the other's committed writes and the size limit
holds across them, where a snapshot sent with the call (as ``$.service.db`` is) would lose one
run's writes. Writes go through the one writer (``engine/state/commit.py``'s ``write``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import data_stores as rules
from sluice.domain.data_stores import DataStore
from sluice.engine.state import quotas
from sluice.engine.state.commit import Commit
from sluice.storage import data_stores as store

T = TypeVar("T")
#: Answers one ``store`` request of an invocation (``runtime/port.StoreCallback``).
StoreCall = Callable[[dict[str, Any]], Awaitable[Any]]


class DataStores:
    def __init__(self, db: AsyncEngine, commit: Commit, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.commit = commit
        self.settings = settings
        self.clock = clock

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        async with self.db.connect() as conn:
            return await conn.run_sync(fn)

    # ---- the stores ---------------------------------------------------------------------------

    async def all(self, owner_id: str) -> list[DataStore]:
        now = self.clock.now_ms()
        return await self._read(lambda c: store.list_sync(c, owner_id, now))

    async def get(self, owner_id: str, ref: str) -> DataStore:
        now = self.clock.now_ms()
        return await self._read(lambda c: store.require_sync(c, owner_id, ref, now))

    async def create(self, owner_id: str, name: Any) -> DataStore:
        new = DataStore(
            ids.new_id("ds"), owner_id, rules.check_name(name), self.clock.now_ms() // 1000
        )
        return await self.commit.write(lambda c: store.create_sync(c, new))

    async def delete(self, owner_id: str, ref: str) -> None:
        now = self.clock.now_ms()

        def transaction(conn: Connection) -> None:
            store.delete_sync(conn, store.require_sync(conn, owner_id, ref, now).id)

        await self.commit.write(transaction)

    # ---- records ------------------------------------------------------------------------------

    async def records(self, owner_id: str, ref: str) -> list[tuple[str, Any]]:
        now = self.clock.now_ms()

        def read(conn: Connection) -> list[tuple[str, Any]]:
            return store.entries_sync(conn, store.require_sync(conn, owner_id, ref, now).id, now)

        return await self._read(read)

    async def record(self, owner_id: str, ref: str, key: Any) -> Any:
        """The value at ``key``; ``NotFound`` when there is none."""
        found, value = await self.call(owner_id, ref, "get_record", key=key)
        if not found:
            raise errors.NotFound(f"no record {key!r} in this data store")
        return value

    async def call(self, owner_id: str, ref: Any, op: str, **args: Any) -> Any:
        """One operation on the account's store ``ref`` (its id or name), in one transaction."""
        if not isinstance(ref, str) or not ref:
            raise errors.InvalidRequest("a data_store prop needs a data store id or name")
        now = self.clock.now_ms()

        def run(conn: Connection) -> Any:
            found = store.require_sync(conn, owner_id, ref, now)
            return _apply(conn, found.id, op, args, now, self.settings.max_db_bytes)

        if op in {"get", "get_record", "has", "keys", "entries"}:
            return await self._read(run)
        quota = self.commit.quota
        if op != "set" or not quota.enabled:
            return await self.commit.write(run)

        def counted(conn: Connection) -> Any:
            if quota.over_sync(conn, owner_id, now):
                raise quota.error()
            answer = run(conn)
            quota.charge_sync(
                conn, owner_id, quotas.size_of(args.get("key"), args.get("value")), now
            )
            return answer

        return await self.commit.write(counted)

    def runner_call(self, owner_id: str) -> StoreCall:
        """The answerer of one invocation's ``store`` requests, bound to its account."""

        async def answer(request: dict[str, Any]) -> Any:
            op = str(request.get("op"))
            if op not in rules.OPS:
                raise errors.InvalidRequest(f"unknown data store operation {op!r}")
            args = {k: request[k] for k in ("key", "value", "ttl") if k in request}
            return await self.call(owner_id, request.get("store"), op, **args)

        return answer


def _apply(
    conn: Connection, store_id: str, op: str, args: dict[str, Any], now: int, cap: int
) -> Any:
    """One operation, as components see its answer (``undefined`` is None)."""
    if op in ("keys", "entries"):
        pairs = store.entries_sync(conn, store_id, now)
        return [k for k, _ in pairs] if op == "keys" else [[k, v] for k, v in pairs]
    if op == "clear":
        store.clear_sync(conn, store_id)
        return None
    key = rules.check_key(args.get("key"))
    if op == "get_record":
        return store.get_sync(conn, store_id, key, now)
    if op in ("get", "has"):
        found, value = store.get_sync(conn, store_id, key, now)
        return found if op == "has" else {"found": found, "value": value}
    if op == "delete":
        store.delete_key_sync(conn, store_id, key, now)
        return None
    expires = rules.expires_at(now, rules.check_ttl(args.get("ttl")))
    if op == "setTtl":
        return store.set_ttl_sync(conn, store_id, key, expires, now)
    if "value" not in args:
        raise errors.InvalidRequest("set needs a value")
    store.set_sync(
        conn, store_id, key, args["value"], expires_ms=expires, now_ms=now, max_bytes=cap
    )
    return None
