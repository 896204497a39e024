"""Deliveries of events to webhooks (``dlv_…``): rows of ``deliveries``, moved through the
states of ``domain/deliveries.py``.

A claim is a lease: it pushes a due delivery's ``next_ms`` to the end of the lease and counts
the attempt, so a worker that died leaves it due again when the lease ends (at least once). The
``claims`` count (never reset, unlike ``attempts``, which a retry by hand starts again) is
the fencing token: an attempt's outcome is stored only while the delivery is still pending at
that count, so a worker that stalled past its lease (and whose
delivery another worker took over) stores nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain.deliveries import Delivery, DeliveryState
from sluice.storage.tables import deliveries as t


def _of(row: Any) -> Delivery:
    return Delivery(
        row.id,
        row.webhook_id,
        row.owner_id,
        row.payload,
        row.status,
        row.attempts,
        row.claims,
        row.next_ms,
        row.since_ms,
        row.created_ms,
        row.finished_ms,
        row.last_status,
        row.last_error,
    )


@dataclass(frozen=True)
class NewDelivery:
    """A delivery to store (``insert_many_sync``)."""

    id: str
    webhook_id: str
    owner_id: str
    #: {event_id, emitter_id, channel, event}
    payload: Any


@dataclass(frozen=True)
class AttemptOutcome:
    """What one attempt came to: ``next_ms`` set (another attempt then), or ``state``
    delivered or dead."""

    delivery_id: str
    #: The claim count the worker claimed it at (the fencing token).
    claims: int
    state: DeliveryState
    now_ms: int
    next_ms: int | None = None
    http_status: int | None = None
    error: str | None = None


#: Built once: a statement built per delivery (``insert().values(...)``) cost more CPU than
#: the rest of its insert.
_INSERT = t.insert()


def insert_many_sync(conn: Connection, rows: Sequence[NewDelivery], *, now_ms: int) -> None:
    """Store deliveries due now, pending, in one statement."""
    if not rows:
        return
    conn.execute(
        _INSERT,
        [
            {
                "id": row.id,
                "webhook_id": row.webhook_id,
                "owner_id": row.owner_id,
                "payload": row.payload,
                "status": DeliveryState.PENDING,
                "attempts": 0,
                "claims": 0,
                "next_ms": now_ms,
                "since_ms": now_ms,
                "created_ms": now_ms,
            }
            for row in rows
        ],
    )


#: The claim's statements, built once (expanding ``IN`` lists): building them per claim cost
#: more CPU than running them (a claim takes a few dozen deliveries).
_DUE = (
    sa.select(t.c.id, t.c.webhook_id)
    .where(t.c.status == DeliveryState.PENDING, t.c.next_ms <= sa.bindparam("b_now"))
    .order_by(t.c.next_ms)
    .limit(sa.bindparam("b_limit"))
)
_DUE_SKIPPING = _DUE.where(t.c.webhook_id.not_in(sa.bindparam("b_skip", expanding=True)))
_CLAIM = (
    t.update()
    .where(
        t.c.id.in_(sa.bindparam("b_ids", expanding=True)),
        t.c.status == DeliveryState.PENDING,
        t.c.next_ms <= sa.bindparam("b_now"),
    )
    .values(next_ms=sa.bindparam("b_until"), attempts=t.c.attempts + 1, claims=t.c.claims + 1)
    .returning(*t.c)
)


def due_sync(
    conn: Connection, *, now_ms: int, limit: int, skip: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """Up to ``limit`` due deliveries, oldest due first, but those of the webhooks in ``skip``
    (at their bound in this worker): ``(id, webhook_id)`` pairs, not yet claimed."""
    params: dict[str, Any] = {"b_now": now_ms, "b_limit": limit}
    if skip:
        rows = conn.execute(_DUE_SKIPPING, params | {"b_skip": list(skip)})
    else:
        rows = conn.execute(_DUE, params)
    return [(row[0], row[1]) for row in rows]


def claim_sync(
    conn: Connection, delivery_ids: Sequence[str], *, now_ms: int, lease_ms: int
) -> list[Delivery]:
    """Lease the deliveries that are still due (another worker may have taken some since
    ``due_sync``: on PostgreSQL the update waits for its lock, then sees them not due)."""
    if not delivery_ids:
        return []
    rows = conn.execute(
        _CLAIM, {"b_ids": list(delivery_ids), "b_now": now_ms, "b_until": now_ms + lease_ms}
    )
    return sorted((_of(row) for row in rows), key=lambda d: (d.next_ms, d.id))


#: An attempt's outcome, stored only while its claim is current (built once: building a
#: statement per outcome was most of a delivery's CPU besides the request).
_SETTLE_WHERE = (
    t.c.id == sa.bindparam("b_id"),
    t.c.status == DeliveryState.PENDING,
    t.c.claims == sa.bindparam("b_claims"),
)
_RETRY_LATER = (
    t.update()
    .where(*_SETTLE_WHERE)
    .values(
        next_ms=sa.bindparam("b_next"),
        last_status=sa.bindparam("b_status"),
        last_error=sa.bindparam("b_error"),
    )
)
_FINISHED = (
    t.update()
    .where(*_SETTLE_WHERE)
    .values(
        status=sa.bindparam("b_state"),
        finished_ms=sa.bindparam("b_now"),
        last_status=sa.bindparam("b_status"),
        last_error=sa.bindparam("b_error"),
    )
)


def settle_sync(conn: Connection, outcomes: Sequence[AttemptOutcome]) -> None:
    """Store attempts' outcomes (one statement for many), each only if its claim is still the
    current one: a worker that lost its lease stores nothing."""
    later: list[dict[str, Any]] = []
    finished: list[dict[str, Any]] = []
    for outcome in outcomes:
        params: dict[str, Any] = {
            "b_id": outcome.delivery_id,
            "b_claims": outcome.claims,
            "b_status": outcome.http_status,
            "b_error": outcome.error[:4000] if outcome.error else None,
        }
        if outcome.state == DeliveryState.PENDING:
            later.append(params | {"b_next": outcome.next_ms})
        else:
            finished.append(params | {"b_state": str(outcome.state), "b_now": outcome.now_ms})
    if later:
        conn.execute(_RETRY_LATER, later)
    if finished:
        conn.execute(_FINISHED, finished)


def delete_sync(conn: Connection, delivery_id: str) -> None:
    conn.execute(t.delete().where(t.c.id == delivery_id))


def release_sync(conn: Connection, claimed: Sequence[tuple[str, int]], *, now_ms: int) -> None:
    """Due again now: deliveries a stopping worker claimed (``(id, claims)``) and did not
    finish, their attempt not counted."""
    for delivery_id, claims in claimed:
        conn.execute(
            t.update()
            .where(
                t.c.id == delivery_id,
                t.c.status == DeliveryState.PENDING,
                t.c.claims == claims,
            )
            .values(next_ms=now_ms, attempts=t.c.attempts - 1)
        )


def next_due_sync(conn: Connection, *, now_ms: int) -> int | None:
    """When the next pending delivery becomes due, after ``now_ms``; None: none is."""
    query = sa.select(sa.func.min(t.c.next_ms)).where(
        t.c.status == DeliveryState.PENDING, t.c.next_ms > now_ms
    )
    value = conn.execute(query).scalar()
    return None if value is None else int(value)


async def list_for(
    conn: AsyncConnection,
    owner_id: str,
    webhook_id: str,
    *,
    status: str | None,
    limit: int,
    before: str | None = None,
) -> list[Delivery]:
    """A webhook's deliveries, newest first (``before``: older than that delivery)."""
    query = sa.select(t).where(t.c.owner_id == owner_id, t.c.webhook_id == webhook_id)
    if status is not None:
        query = query.where(t.c.status == status)
    if before is not None:
        anchor = (await conn.execute(sa.select(t.c.created_ms).where(t.c.id == before))).scalar()
        if anchor is not None:
            query = query.where(
                sa.or_(t.c.created_ms < anchor, sa.and_(t.c.created_ms == anchor, t.c.id < before))
            )
    query = query.order_by(t.c.created_ms.desc(), t.c.id.desc()).limit(limit)
    return [_of(row) for row in await conn.execute(query)]


async def get(conn: AsyncConnection, owner_id: str, delivery_id: str) -> Delivery | None:
    query = sa.select(t).where(t.c.owner_id == owner_id, t.c.id == delivery_id)
    row = (await conn.execute(query)).first()
    return _of(row) if row else None


async def counts(conn: AsyncConnection, owner_id: str) -> dict[tuple[str, str], int]:
    """``(webhook_id, status) → count`` for the account's deliveries."""
    query = (
        sa.select(t.c.webhook_id, t.c.status, sa.func.count())
        .where(t.c.owner_id == owner_id)
        .group_by(t.c.webhook_id, t.c.status)
    )
    return {(row[0], row[1]): int(row[2]) for row in await conn.execute(query)}


async def state_counts(conn: AsyncConnection) -> dict[str, int]:
    """``state → count`` of every account's deliveries (the metrics)."""
    query = sa.select(t.c.status, sa.func.count()).group_by(t.c.status)
    return {row[0]: int(row[1]) for row in await conn.execute(query)}


async def retry(
    conn: AsyncConnection,
    owner_id: str,
    webhook_id: str,
    *,
    now_ms: int,
    delivery_ids: Sequence[str] | None = None,
) -> list[str]:
    """Dead deliveries pending again, due now, with a new retry schedule (the same id, so the
    same ``Idempotency-Key``): those given, or every dead one of the webhook. Their ids."""
    where = [
        t.c.owner_id == owner_id,
        t.c.webhook_id == webhook_id,
        t.c.status == DeliveryState.DEAD,
    ]
    if delivery_ids is not None:
        where.append(t.c.id.in_(list(delivery_ids)))
    rows = await conn.execute(
        t.update()
        .where(*where)
        .values(
            status=DeliveryState.PENDING,
            next_ms=now_ms,
            since_ms=now_ms,
            attempts=0,
            finished_ms=None,
        )
        .returning(t.c.id)
    )
    return [row.id for row in rows]


def prune_sync(conn: Connection, *, finished_before_ms: int, limit: int) -> int:
    """Delete up to ``limit`` delivered deliveries finished before the time (dead ones are
    kept); the number deleted."""
    old = (
        sa.select(t.c.id)
        .where(t.c.status == DeliveryState.DELIVERED, t.c.finished_ms < finished_before_ms)
        .limit(limit)
    )
    return int(conn.execute(t.delete().where(t.c.id.in_(old.scalar_subquery()))).rowcount or 0)
