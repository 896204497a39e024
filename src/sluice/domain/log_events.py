"""The ``$logs`` event: a source invocation's or a workflow run's console lines, as its
``$logs`` subscribers receive them. Pure.

Pipedream forwards "the logs of event sources" to ``$logs`` listeners and documents no shape;
Sluice sends one event per invocation (or run) that logged, not one per line, so a chatty
source costs one listener run, not a thousand:

``{"logs": [{"ts", "level", "msg", "step"?}], "emitter_id", "invocation_id"}``, ``ts`` in epoch
ms, ``level`` the console method (``log``, ``info``, ``warn``, ``error``, ``debug``), ``step``
the step's name (workflows).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def event(
    lines: Iterable[dict[str, Any]], *, emitter_id: str, invocation_id: str
) -> dict[str, Any]:
    """``event([{"ts": 1, "level": "info", "msg": "hi"}], emitter_id="dc_a", invocation_id="i")``
    → ``{"logs": [{"ts": 1, "level": "info", "msg": "hi"}], "emitter_id": "dc_a",
    "invocation_id": "i"}``."""
    return {
        "logs": [_line(line) for line in lines],
        "emitter_id": emitter_id,
        "invocation_id": invocation_id,
    }


def _line(line: dict[str, Any]) -> dict[str, Any]:
    out = {"ts": line.get("ts"), "level": line.get("level") or "log", "msg": line.get("msg")}
    if line.get("step"):
        out["step"] = line["step"]
    return out


def run_lines(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's lines, in step order, each named by its step."""
    return [
        {**line, "step": step.get("name")}
        for step in steps
        for line in step.get("logs") or ()
        if isinstance(line, dict)
    ]
