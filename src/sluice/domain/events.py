"""Emitted events and log lines of an emitter (a source or a workflow), as stored in
``storage/events.py`` and streamed. Plain values.

Event ids are ``<ts_ms>-<seq>``, strictly increasing per emitter; ``position`` is where one
sorts.

>>> position("1606370816223-4")
(1606370816223, 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice import ids


@dataclass(frozen=True)
class Event:
    id: str
    emitter_id: str
    ts_ms: int
    channel: str
    emit_id: str
    payload: Any
    meta: dict[str, Any]

    @property
    def position(self) -> tuple[int, int]:
        return position(self.id)


def position(event_id: str) -> tuple[int, int]:
    """Where an event id sorts: ``"1606370816223-4"`` → ``(1606370816223, 4)``."""
    return ids.parse_event_id(event_id) or (0, 0)


@dataclass(frozen=True)
class LogLine:
    pk: int
    emitter_id: str
    ts_ms: int
    level: str
    msg: str
    invocation_id: str | None
