"""Dedupe of one invocation's emits, as the spec's table says. Pure: state in, state out.

1. Emits that carry a numeric ``ts`` are ordered oldest to newest (stable; an emit without
   ``ts`` counts as emitted at ``now_ms``).
2. Under a strategy an emit without ``id`` is dropped, with the reason, for the run's logs.
3. ``unique``: FIFO cache of the last 100 ids (as strings). ``greatest``: numeric ids only,
   emitted when larger than the cached largest. ``last``: only the emits after the one whose id
   matches the cached id (all when none matches); the cache becomes the batch's last id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

UNIQUE_CACHE = 100


@dataclass
class Decision:
    emitted: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    state: dict[str, Any] | None = None


def order(emits: list[dict[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    def ts(emit: dict[str, Any]) -> float:
        value = (emit.get("meta") or {}).get("ts")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return float(now_ms)

    if not any("ts" in (e.get("meta") or {}) for e in emits):
        return list(emits)
    return sorted(emits, key=ts)


def apply(
    strategy: str | None, state: dict[str, Any] | None, emits: list[dict[str, Any]], now_ms: int
) -> Decision:
    batch = order(emits, now_ms)
    if strategy is None:
        return Decision(emitted=batch, state=state)
    decision = Decision()
    keyed = _keyed(strategy, batch, decision)
    state = dict(state or {})
    if strategy == "unique":
        _unique(keyed, state, decision)
    elif strategy == "greatest":
        _greatest(keyed, state, decision)
    elif strategy == "last":
        _last(keyed, state, decision)
    else:
        raise ValueError(f"unknown dedupe strategy {strategy!r}")
    decision.state = state
    return decision


def _keyed(strategy: str, batch: list[dict[str, Any]], decision: Decision) -> list[dict[str, Any]]:
    """The emits that carry an ``id``; the others are dropped, with the reason."""
    keyed: list[dict[str, Any]] = []
    for emit in batch:
        emit_id = (emit.get("meta") or {}).get("id")
        if emit_id is None or emit_id == "":
            decision.dropped.append(
                (
                    emit,
                    f"not emitted: the {strategy} dedupe strategy needs an id "
                    "in the $emit options ($emit(event, {id}))",
                )
            )
        else:
            keyed.append(emit)
    return keyed


def _unique(keyed: list[dict[str, Any]], state: dict[str, Any], decision: Decision) -> None:
    seen: list[str] = list(state.get("ids") or [])
    for emit in keyed:
        key = str(emit["meta"]["id"])
        if key in seen:
            continue
        decision.emitted.append(emit)
        seen.append(key)
        if len(seen) > UNIQUE_CACHE:
            del seen[0]
    state["ids"] = seen


def _greatest(keyed: list[dict[str, Any]], state: dict[str, Any], decision: Decision) -> None:
    best = state.get("max")
    for emit in keyed:
        number = _number(emit["meta"]["id"])
        if number is None:
            decision.dropped.append(
                (
                    emit,
                    f"not emitted: the greatest dedupe strategy needs a numeric id, "
                    f"not {emit['meta']['id']!r}",
                )
            )
            continue
        if best is None or number > best:
            decision.emitted.append(emit)
            best = number
    if best is not None:
        state["max"] = best


def _last(keyed: list[dict[str, Any]], state: dict[str, Any], decision: Decision) -> None:
    last = state.get("last")
    ids = [str(e["meta"]["id"]) for e in keyed]
    start = ids.index(last) + 1 if last is not None and last in ids else 0
    decision.emitted.extend(keyed[start:])
    if ids:
        state["last"] = ids[-1]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None
