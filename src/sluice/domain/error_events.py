"""The ``$errors`` event, one shape for a workflow's failed run and a source's failed ``run()``
(Pipedream's): ``{error: {code, msg, cellId, ts, stack, name}, original_event,
original_context}``.

>>> error_of({"name": "TypeError", "message": "x is undefined"}, cell_id="c_1", ts="t")["code"]
'TypeError'
"""

from __future__ import annotations

from typing import Any


def error_of(raw: dict[str, Any], *, cell_id: str, ts: str) -> dict[str, Any]:
    """The ``error`` of an ``$errors`` event, from the runtime's error (``name``, ``code``,
    ``message``, ``stack``): ``code`` is the runtime's code, else the error's name."""
    name = raw.get("name") or "Error"
    return {
        "code": str(raw.get("code") or raw.get("name") or "Error"),
        "msg": raw.get("message") or "",
        "cellId": cell_id,
        "ts": ts,
        "stack": raw.get("stack") or f"{name}: {raw.get('message')}",
        "name": name,
    }


def event(error: dict[str, Any], original_event: Any, context: dict[str, Any]) -> dict[str, Any]:
    """The ``$errors`` event itself."""
    return {"error": error, "original_event": original_event, "original_context": context}
