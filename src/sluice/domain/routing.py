"""Routing of stored emits to subscribers, and the rules a new subscription must follow. Pure.

A subscription links an emitter (a source ``dc_…`` or a workflow ``p_…``, or the globs
``dc_*``/``p_*``: every source / workflow of the account) to a listener (a source or a
workflow) for one channel (``event_name``; ``""`` is the default channel). An event reaches
the listeners subscribed to its emitter (or to the glob) for exactly its channel: a named
channel reaches only its own subscribers (the spec's Events rule 5).

Two guards against a source triggering itself forever:

1. A subscription of a source to its own *default* channel is refused (every run would emit
   into the next). Its own *named* channel is allowed: Pipedream's scheduled-tasks source
   subscribes to its own ``self`` channel.
2. A glob never delivers a source's event back to that source: ``dc_*`` means "every source
   of the account", and a listener that is itself a source would otherwise hear its own emits.

An emit with a ``delivery_ts`` in the future (``scheduled_at``) waits in its source's ``$in``
channel and is delivered on its own channel at that time (unless deleted from ``$in`` first).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sluice import errors
from sluice.domain import states

#: Emitter globs: every source, every workflow of the account.
SOURCES_GLOB = "dc_*"
WORKFLOWS_GLOB = "p_*"
#: The channel of a workflow's errors.
MAX_EVENT_NAME = 300


@dataclass(frozen=True)
class Link:
    emitter_id: str
    listener_id: str
    event_name: str


def emitter_patterns(emitter_id: str) -> tuple[str, ...]:
    """The ``emitter_id`` values a subscription may carry to hear ``emitter_id``."""
    if emitter_id.startswith("dc_"):
        return (emitter_id, SOURCES_GLOB)
    if emitter_id.startswith("p_"):
        return (emitter_id, WORKFLOWS_GLOB)
    return (emitter_id,)


def listeners(links: Iterable[Link], emitter_id: str, channel: str) -> list[str]:
    """Who hears an event of ``emitter_id`` on ``channel``: each listener once, in the order
    of ``links``.

    >>> listeners([Link("dc_*", "dc_b", ""), Link("dc_a", "dc_b", "")], "dc_a", "")
    ['dc_b']
    """
    patterns = emitter_patterns(emitter_id)
    out: list[str] = []
    for link in links:
        if link.event_name != channel or link.emitter_id not in patterns:
            continue
        if link.emitter_id != emitter_id and link.listener_id == emitter_id:
            continue  # guard 2: a glob never echoes a source's event back to it
        if link.listener_id not in out:
            out.append(link.listener_id)
    return out


def scheduled_at(meta: Any, now_ms: int) -> int | None:
    """When an emit is to be delivered, if later than now: its ``delivery_ts`` (epoch ms, as
    Pipedream's ``$emit(event, {delivery_ts})``); None to deliver it now.

    >>> scheduled_at({"delivery_ts": 5_000}, 1_000), scheduled_at({"delivery_ts": 500}, 1_000)
    (5000, None)
    >>> scheduled_at({"delivery_ts": "soon"}, 0), scheduled_at({}, 0)
    (None, None)
    """
    ts = meta.get("delivery_ts") if isinstance(meta, dict) else None
    if isinstance(ts, bool) or not isinstance(ts, int | float) or ts != ts:
        return None
    return int(ts) if ts > now_ms else None


def check_link(emitter_id: str, listener_id: str, event_name: str) -> None:
    """Refuse what can never work, naming the query parameter at fault. Whether the ids exist
    in the account is the caller's question (404)."""
    if emitter_id not in (SOURCES_GLOB, WORKFLOWS_GLOB):
        _check_end("emitter_id", emitter_id)
    _check_end("listener_id", listener_id)
    if len(event_name) > MAX_EVENT_NAME:
        raise errors.InvalidRequest(
            f"event_name is longer than {MAX_EVENT_NAME} characters", field="event_name"
        )
    if listener_id == emitter_id and (
        event_name in ("", states.ERRORS, states.LOGS) or emitter_id.startswith("p_")
    ):
        raise errors.InvalidRequest(
            f"{listener_id} cannot listen to its own "
            + {states.ERRORS: "errors", states.LOGS: "logs"}.get(event_name, "events")
            + ": each run would trigger the next"
            + ("" if emitter_id.startswith("p_") else "; subscribe it to a named channel instead"),
            field="listener_id",
        )


def _check_end(field: str, value: str) -> None:
    if value.startswith("sc_"):
        raise errors.InvalidRequest(
            f"{field} {value} is a saved component, not a deployed source (dc_…) or a workflow "
            "(p_…); actions run as workflow steps and neither emit nor listen",
            field=field,
        )
    if value.startswith("wh_") and field == "emitter_id":
        raise errors.InvalidRequest(
            f"{field} {value}: a webhook only listens (it receives events at its URL)", field=field
        )
    ok = (value.startswith("dc_") and len(value) > 3) or (value.startswith("p_") and len(value) > 2)
    ok = ok or (value.startswith("wh_") and len(value) > 3)
    if not ok or "*" in value:
        glob = (
            " or a glob: dc_* (every source) or p_* (every workflow)"
            if field == "emitter_id"
            else ""
        )
        raise errors.InvalidRequest(
            f"{field} {value!r} must be a deployed source (dc_…) or a workflow (p_…){glob}"
            + (", or a webhook (wh_…)" if field == "listener_id" else ""),
            field=field,
        )


@dataclass(frozen=True)
class Subscription:
    id: str
    owner_id: str
    emitter_id: str
    listener_id: str
    event_name: str
    created_at: int

    @property
    def link(self) -> Link:
        return Link(self.emitter_id, self.listener_id, self.event_name)


@dataclass(frozen=True)
class AutoSubscription:
    id: str
    listener_id: str
    event_name: str
    created_at: int
