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
    """One ``emit`` job per subscribed listener of each stored event (``items`` are the
    events' ``(channel, payload, meta)``, in ``event_ids`` order); the number enqueued. A sync
    function of the persist transaction's connection (the inline SQLite writer, or
    ``run_sync`` on PostgreSQL), which also reads the subscriptions."""
    if not event_ids:
        return 0
    links = subscriptions.from_emitter(conn, emitter.owner_id, routing.emitter_patterns(emitter.id))
    count = 0
    for event_id, (channel, payload, _meta) in zip(event_ids, items, strict=True):
        for listener_id in routing.listeners(links, emitter.id, channel):
            jobs.enqueue_sync(
                conn,
                kind=JobKind.EMIT,
                owner_id=emitter.owner_id,
                target_id=listener_id,
                payload={
                    "event_id": event_id,
                    "emitter_id": emitter.id,
                    "channel": channel,
                    "event": payload,
                },
                now_ms=now_ms,
            )
            count += 1
    return count
