"""An event as an event list shows it without ``expand=event``: whole up to 1 KB, else cut.

Pipedream: "The event data for events larger than 1KB may get truncated in the response. If
you're retrieving larger events, and need to see the full event data, pass ?expand=event".
Sluice cuts a larger event to what fits in ``max_bytes`` of JSON (UTF-8) and keeps its shape,
so a client reads the same fields: an object keeps its smaller entries whole and cuts the larger
ones into equal shares of the room left, an array keeps its first items, a long string its
start followed by ``…``; what no longer fits is left out.

>>> preview({"name": "Luke"})
({'name': 'Luke'}, False)
>>> preview({"a": "x" * 50, "b": 1}, max_bytes=30)
({'a': 'xxxxxxxxxxxx…', 'b': 1}, True)
>>> preview([1, 2, 3, 4], max_bytes=6)
([1, 2], True)
"""

from __future__ import annotations

import json
from typing import Any

#: Pipedream's "1KB".
MAX_BYTES = 1024
_ELLIPSIS = "…"


def preview(value: Any, max_bytes: int = MAX_BYTES) -> tuple[Any, bool]:
    """(``value`` or its cut form, whether it was cut)."""
    if _size(value) <= max_bytes:
        return value, False
    fitted = _fit(value, max_bytes)
    return fitted, True


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def _fit(value: Any, budget: int) -> Any:
    """``value`` cut to at most ``budget`` bytes of JSON; None when not even a part fits."""
    if _size(value) <= budget:
        return value
    if isinstance(value, str):
        return _fit_text(value, budget)
    if isinstance(value, dict):
        return _fit_object(value, budget)
    if isinstance(value, list):
        items: list[Any] = []
        for item in value:
            room = budget - _size(items) - 1  # the comma
            fitted = _fit(item, room) if room > 0 else None
            if fitted is None:
                break
            items.append(fitted)
        return items if _size(items) <= budget else None
    return None  # a number, a boolean or null that does not fit


def _fit_object(value: dict[Any, Any], budget: int) -> dict[str, Any] | None:
    """The smallest entries whole, as many as fit; then the others cut, each into an equal
    share of the room left. In the object's own order (so the key order a database keeps does
    not change what is kept)."""
    entries = [(str(k), v) for k, v in value.items()]
    sizes = [_size(v) for _, v in entries]
    kept: dict[int, Any] = {}
    used = 2  # the braces
    by_size = sorted(range(len(entries)), key=lambda i: (sizes[i], entries[i][0]))
    for i in by_size:
        cost = _size(entries[i][0]) + sizes[i] + 2  # the colon, and a comma
        if used + cost > budget:
            break
        kept[i], used = entries[i][1], used + cost
    rest = [i for i in range(len(entries)) if i not in kept]
    for n, i in enumerate(rest):
        share = (budget - used) // (len(rest) - n)
        room = share - _size(entries[i][0]) - 2
        fitted = _fit(entries[i][1], room) if room > 0 else None
        if fitted is not None:
            kept[i] = fitted
            used += _size(entries[i][0]) + _size(fitted) + 2
    out = {entries[i][0]: kept[i] for i in sorted(kept)}
    return out if _size(out) <= budget else None


def _fit_text(text: str, budget: int) -> str | None:
    """The longest start of ``text`` that fits with ``…`` after it (binary search: a
    character is at least one byte, so no more than ``budget`` characters can fit)."""
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if _size(text[:middle] + _ELLIPSIS) <= budget:
            low = middle
        else:
            high = middle - 1
    cut = text[:low] + _ELLIPSIS
    return cut if _size(cut) <= budget else None
