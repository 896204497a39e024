"""A test run's data stores (the builder's Test): a scratch copy of the account's stores,
made lazily and discarded with the test.

Reads see the account's real records; writes (``set``, ``delete``, ``clear``, ``setTtl``) go
to this object only and change nothing stored. Each later call of the same test sees them, so
a step that writes then reads behaves as in a real run, and the next test (or real run) does
not. The real stores are only read, through ``DataStores.call``, so the account's scoping and
a store's existence are checked as for a real run; the size limit applies to the store as the
test sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sluice import errors
from sluice.clock import Clock
from sluice.domain import data_stores as rules
from sluice.engine.state.data_stores import DataStores


@dataclass
class _Layer:
    """One store's writes in the test: records written (value, expiry), keys deleted, and
    whether it was cleared (then the real records are hidden)."""

    written: dict[str, tuple[Any, int | None]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    cleared: bool = False


class ScratchStores:
    """The answerer of one test invocation's ``store`` requests (``answer``)."""

    def __init__(self, stores: DataStores, owner_id: str, clock: Clock, max_bytes: int) -> None:
        self.stores = stores
        self.owner_id = owner_id
        self.clock = clock
        self.max_bytes = max_bytes
        self._layers: dict[str, _Layer] = {}

    async def answer(self, request: dict[str, Any]) -> Any:
        op = str(request.get("op"))
        if op not in rules.OPS:
            raise errors.InvalidRequest(f"unknown data store operation {op!r}")
        ref = request.get("store")
        if not isinstance(ref, str) or not ref:
            raise errors.InvalidRequest("a data_store prop needs a data store id or name")
        store_id = (await self.stores.get(self.owner_id, ref)).id
        layer = self._layers.setdefault(store_id, _Layer())
        now = self.clock.now_ms()
        if op in ("keys", "entries"):
            pairs = await self._entries(store_id, layer, now)
            return [k for k, _ in pairs] if op == "keys" else [[k, v] for k, v in pairs]
        if op == "clear":
            self._layers[store_id] = _Layer(cleared=True)
            return None
        key = rules.check_key(request.get("key"))
        if op in ("get", "has"):
            found, value = await self._get(store_id, layer, key, now)
            return found if op == "has" else {"found": found, "value": value}
        if op == "delete":
            layer.written.pop(key, None)
            layer.deleted.add(key)
            return None
        expires = rules.expires_at(now, rules.check_ttl(request.get("ttl")))
        if op == "setTtl":
            found, value = await self._get(store_id, layer, key, now)
            if found:
                layer.written[key] = (value, expires)
            return found
        if "value" not in request:
            raise errors.InvalidRequest("set needs a value")
        await self._check_size(store_id, layer, key, request["value"], now)
        layer.written[key] = (request["value"], expires)
        layer.deleted.discard(key)
        return None

    async def _get(self, store_id: str, layer: _Layer, key: str, now: int) -> tuple[bool, Any]:
        if key in layer.written:
            value, expires = layer.written[key]
            return (True, value) if expires is None or expires > now else (False, None)
        if layer.cleared or key in layer.deleted:
            return False, None
        answer = await self.stores.call(self.owner_id, store_id, "get", key=key)
        return bool(answer["found"]), answer["value"]

    async def _entries(self, store_id: str, layer: _Layer, now: int) -> list[tuple[str, Any]]:
        real: list[list[Any]] = (
            [] if layer.cleared else await self.stores.call(self.owner_id, store_id, "entries")
        )
        out = [(k, v) for k, v in real if k not in layer.deleted and k not in layer.written]
        out += [
            (k, value)
            for k, (value, expires) in layer.written.items()
            if expires is None or expires > now
        ]
        return sorted(out, key=lambda pair: pair[0])

    async def _check_size(
        self, store_id: str, layer: _Layer, key: str, value: Any, now: int
    ) -> None:
        pairs = await self._entries(store_id, layer, now)
        total = sum(rules.record_size(k, v) for k, v in pairs)
        old = next((rules.record_size(k, v) for k, v in pairs if k == key), 0)
        rules.check_size(total, old, rules.record_size(key, value), self.max_bytes)
