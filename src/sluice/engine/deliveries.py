"""Deliveries: a stored emit reaching the listeners subscribed to its channel.

``enqueue_sync`` runs inside the transaction that stores the emits (``Invoker.persist``) and
adds one durable ``emit`` job per (listener, event): an emit is never stored without its
deliveries. ``handlers/emit.py`` runs those jobs.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.engine import Connection

from sluice.domain import routing
from sluice.domain.states import JobKind
from sluice.storage import jobs, subscriptions
from sluice.storage.sources import Deployment

log = logging.getLogger(__name__)


def enqueue_sync(
    conn: Connection,
    emitter: Deployment,
    event_ids: list[str],
    items: list[tuple[str, Any, dict[str, Any]]],
    now_ms: int,
) -> int:
    """One ``emit`` job per subscribed listener of each stored event of a source (``items``
    are the events' ``(channel, payload, meta)``, in ``event_ids`` order); the number enqueued.
    A sync function of the persist transaction's connection (the inline SQLite writer, or
    ``run_sync`` on PostgreSQL), which also reads the subscriptions."""
    if not event_ids:
        return 0
    links = subscriptions.from_emitter(conn, emitter.owner_id, routing.emitter_patterns(emitter.id))
    count = 0
    for event_id, (channel, payload, _meta) in zip(event_ids, items, strict=True):
        listeners = routing.listeners(links, emitter.id, channel)
        count += forward_sync(
            conn, emitter.owner_id, emitter.id, listeners, event_id, channel, payload, now_ms
        )
    return count


def forward_sync(
    conn: Connection,
    owner_id: str,
    emitter_id: str,
    listeners: list[str],
    event_id: str,
    channel: str,
    event: Any,
    now_ms: int,
    *,
    chain: list[str] | None = None,
    max_hops: int = 0,
) -> int:
    """The ``emit`` jobs of one stored event, one per listener; the number enqueued. With a
    ``chain`` (the workflows an event went through, ``hops``), a listener already on it is
    skipped (never a loop), and nothing goes past ``max_hops``."""
    count = 0
    for listener in listeners:
        if chain is not None and listener in chain:
            continue  # it is on this event's way already: never a loop
        if chain is not None and max_hops and len(chain) >= max_hops:
            log.warning(
                "forwarding stopped after %d hops",
                len(chain),
                extra={"action": "hops_exceeded", "emitter_id": emitter_id},
            )
            return count
        payload: dict[str, Any] = {
            "event_id": event_id,
            "emitter_id": emitter_id,
            "channel": channel,
            "event": event,
        }
        if chain is not None:
            payload["hops"] = chain
        jobs.enqueue_sync(
            conn,
            kind=JobKind.EMIT,
            owner_id=owner_id,
            target_id=listener,
            payload=payload,
            now_ms=now_ms,
        )
        count += 1
    return count
