"""Limits on what is kept. Pure: the output in, the part to keep and the error out.

On what one invocation may leave behind: ``$emit`` calls and the ``$.service.db`` store. Both
are checked by Python where the output is applied, so a runner that lies cannot get past them
(the Node runner also stops collecting emits one past the cap, so Python never decodes a
flood). The errors have the runtime's shape ``{name, code, message, stack}``.

On stored lists (events, logs, runs): when to trim one back to its retention
(``TrimSchedule``). Not on every write (a DELETE per run costs), but once about a tenth of the
retention was added since the last trim, so a list never holds more than 110% of it.

>>> trims = TrimSchedule()
>>> [trims.due(("events", "dc_1"), added=1, retention=20) for _ in range(3)]
[False, True, False]
"""

from __future__ import annotations

import json
from collections.abc import Collection, Hashable, Mapping
from typing import Any

EMIT_LIMIT = "EMIT_LIMIT"
DB_LIMIT = "DB_LIMIT"
PAYLOAD_LIMIT = "PAYLOAD_LIMIT"
DEPTH_LIMIT = "DEPTH_LIMIT"

#: Log lines kept per invocation, and characters per line: the Node runner's own caps
#: (``runtime/js/invocation.mjs``), checked again here against a runner that does not keep
#: them (user code can write to the runner's socket itself).
MAX_LOGS = 1000
MAX_LOG_CHARS = 16 * 1024
_LOG_FIELDS = {"ts": 32, "level": 16, "step": 200}


def _error(name: str, code: str, message: str) -> dict[str, Any]:
    return {"name": name, "code": code, "message": message, "stack": None}


def cap_emits(
    emits: list[dict[str, Any]], cap: int
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The emits kept (the first ``cap``) and the error when there were more; ``cap`` 0: none.

    >>> kept, error = cap_emits([{"event": i} for i in range(3)], 2)
    >>> len(kept), error["code"]
    (2, 'EMIT_LIMIT')
    """
    if cap <= 0 or len(emits) <= cap:
        return emits, None
    return emits[:cap], _error(
        "EmitLimitError",
        EMIT_LIMIT,
        f"the invocation called $emit more than {cap} times (the limit per invocation); "
        f"the first {cap} were kept",
    )


def cap_logs(logs: list[Any]) -> list[dict[str, Any]]:
    """The first ``MAX_LOGS`` lines of ``logs`` (a last line says how many were dropped), each
    ``{ts, level, msg, step}`` with ``msg`` cut to ``MAX_LOG_CHARS``; anything else dropped.

    >>> capped = cap_logs([{"level": "info", "msg": "x" * 20_000, "extra": 1}] * 1001)
    >>> len(capped), len(capped[0]["msg"]) <= MAX_LOG_CHARS, "extra" in capped[0]
    (1000, True, False)
    >>> capped[-1]["msg"]
    '[sluice] 2 log entries dropped (at most 1000 per invocation)'
    """
    kept: list[dict[str, Any]] = []
    for line in logs[: MAX_LOGS - 1] if len(logs) > MAX_LOGS else logs:
        if not isinstance(line, dict):
            continue
        msg = line.get("msg")
        msg = msg if isinstance(msg, str) else str(msg)
        if len(msg) > MAX_LOG_CHARS:
            cut = len(msg) - MAX_LOG_CHARS + 40
            msg = f"{msg[: MAX_LOG_CHARS - 40]}… [{cut} characters truncated]"
        entry: dict[str, Any] = {"msg": msg}
        for name, size in _LOG_FIELDS.items():
            value = line.get(name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number or (isinstance(value, str) and len(value) <= size):
                entry[name] = value
        entry.setdefault("level", "info")
        kept.append(entry)
    if len(logs) > MAX_LOGS:
        dropped = len(logs) - (MAX_LOGS - 1)
        msg = f"[sluice] {dropped} log entries dropped (at most {MAX_LOGS} per invocation)"
        kept.append({"ts": kept[-1].get("ts", 0) if kept else 0, "level": "warn", "msg": msg})
    return kept


def payload_error(size: int, max_bytes: int) -> dict[str, Any] | None:
    """The error of an invocation whose results (emits, exports, logs, return value) take
    ``size`` bytes, over ``max_bytes`` (Pipedream's "Function Payload Limit Exceeded");
    None within it.

    >>> payload_error(10, 10), payload_error(11, 10)["code"]
    (None, 'PAYLOAD_LIMIT')
    """
    if size <= max_bytes:
        return None
    return _error(
        "PayloadLimitError",
        PAYLOAD_LIMIT,
        f"the invocation's results (emits, exports, logs and return value) are {size} bytes, "
        f"over the limit of {max_bytes} bytes; none of them were kept",
    )


def depth_error(max_depth: int) -> dict[str, Any]:
    """The error of an invocation whose results nest arrays and objects deeper than
    ``max_depth`` levels: storage and the API could not give them back."""
    return _error(
        "DepthLimitError",
        DEPTH_LIMIT,
        f"the invocation's results nest arrays and objects deeper than {max_depth} levels; "
        "none of them were kept",
    )


def store_bytes(state: Mapping[str, Any]) -> int:
    """The store's size: its UTF-8 JSON text, as it is sent to the next invocation.

    >>> store_bytes({"a": 1}), store_bytes({"a": "\\ud800"})
    (7, 11)
    """
    text = json.dumps(state, separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate from JavaScript counts as the 3 bytes it would take, not an error.
    return len(text.encode("utf-8", "surrogatepass"))


def check_db(
    state: Mapping[str, Any],
    writes: Mapping[str, Any],
    deletes: Collection[str],
    max_bytes: int,
) -> dict[str, Any] | None:
    """The error when applying ``writes`` and ``deletes`` to ``state`` makes the store larger
    than ``max_bytes`` (and larger than it was: a store over the limit from before may always
    shrink); None when they may be applied. ``max_bytes`` 0: no limit.

    >>> check_db({}, {"k": "x" * 10}, [], 16)["code"], check_db({}, {"k": 1}, [], 16)
    ('DB_LIMIT', None)
    """
    if max_bytes <= 0 or not (writes or deletes):
        return None
    after = {k: v for k, v in state.items() if k not in writes and k not in deletes}
    after.update(writes)
    size = store_bytes(after)
    if size <= max_bytes or size <= store_bytes(state):
        return None
    return _error(
        "DbLimitError",
        DB_LIMIT,
        f"this.db would hold {size} bytes, over the limit of {max_bytes} bytes; none of the "
        "invocation's db writes were saved",
    )


class TrimSchedule:
    """Counts what was added per list since its last trim (per process: a restart only
    delays the next trim)."""

    def __init__(self) -> None:
        self._added: dict[Hashable, int] = {}

    def due(self, key: Hashable, *, added: int, retention: int) -> bool:
        """Whether ``key``'s list, having grown by ``added``, should be trimmed now."""
        if not added:
            return False
        count = self._added.get(key, 0) + added
        if count >= max(1, retention // 10):
            self._added.pop(key, None)
            return True
        self._added[key] = count
        return False
