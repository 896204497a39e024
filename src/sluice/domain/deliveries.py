"""Deliveries of events to webhooks (``wh_…``): their states, when to try again, and which due
deliveries a worker starts. Pure: the counts, the time and the random draw come in.

A delivery's states (``storage/deliveries.py`` moves it; ``engine/outbound/deliveries.py``
decides)::

    pending ──2xx──► delivered
      ▲  │
      │  └──failed, retries used up (max age or max attempts)──► dead
      │                                                           │
      └───────────────────retry (API, CLI, UI)────────────────────┘

A failed attempt leaves the delivery ``pending`` with its next attempt at
``now + delay``: full jitter (a draw between 0 and the ceiling), the ceiling doubling from
``first_ms`` each attempt up to ``cap_ms``, so receivers coming back from an outage are not hit
by every sender at once. Its ``id`` is the ``Idempotency-Key`` of every attempt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class DeliveryState(StrEnum):
    PENDING = "pending"  #: due at its ``next_ms`` (in flight: leased to a worker until then)
    DELIVERED = "delivered"  #: the URL answered 2xx
    DEAD = "dead"  #: every retry failed; kept until retried or its webhook is deleted


@dataclass(frozen=True)
class RetryPolicy:
    """When failed deliveries are tried again (``SLUICE_DELIVERY_*`` settings)."""

    #: The ceiling of the first retry's delay; it doubles each attempt.
    first_ms: int = 1_000
    #: The ceiling stops doubling here.
    cap_ms: int = 900_000
    #: No attempt starts later than this after the delivery was made (or retried by hand).
    max_age_ms: int = 86_400_000
    #: Attempts at most; 0: only the age bounds them.
    max_attempts: int = 0


def ceiling_ms(policy: RetryPolicy, attempts: int) -> int:
    """The longest delay after the ``attempts``-th failed attempt.

    >>> [ceiling_ms(RetryPolicy(), n) for n in (1, 2, 3, 11, 30)]
    [1000, 2000, 4000, 900000, 900000]
    """
    exponent = min(max(0, attempts - 1), 40)  # 2**40 s is past any cap
    return int(min(policy.cap_ms, policy.first_ms * 2**exponent))


def next_attempt_ms(
    policy: RetryPolicy, *, attempts: int, since_ms: int, now_ms: int, draw: float
) -> int | None:
    """When to try again after the ``attempts``-th attempt failed at ``now_ms`` (the delivery's
    schedule started at ``since_ms``), or None: dead. ``draw`` is uniform in [0, 1).

    >>> p = RetryPolicy(first_ms=1000, cap_ms=8000, max_age_ms=60_000)
    >>> next_attempt_ms(p, attempts=3, since_ms=0, now_ms=10_000, draw=0.5)
    12000
    >>> next_attempt_ms(p, attempts=9, since_ms=0, now_ms=59_000, draw=0.5) is None
    True
    """
    if policy.max_attempts and attempts >= policy.max_attempts:
        return None
    at = now_ms + int(draw * ceiling_ms(policy, attempts))
    if at - since_ms > policy.max_age_ms:
        return None
    return at


def pick(targets: Sequence[str], busy: Mapping[str, int], free: int, per_target: int) -> list[int]:
    """Which due deliveries (their webhooks, oldest first) to start: at most ``free``, and at
    most ``per_target`` in flight per webhook counting ``busy``, so a slow or unreachable URL
    holds only its own slots. The positions picked.

    >>> pick(["a", "a", "a", "b", "a"], busy={"a": 1}, free=3, per_target=2)
    [0, 3]
    """
    counts = dict(busy)
    out: list[int] = []
    for position, target in enumerate(targets):
        if len(out) >= free:
            break
        if counts.get(target, 0) < per_target:
            counts[target] = counts.get(target, 0) + 1
            out.append(position)
    return out


def full(busy: Mapping[str, int], per_target: int) -> list[str]:
    """The webhooks at their bound: a claim leaves their deliveries alone.

    >>> full({"a": 2, "b": 1}, per_target=2)
    ['a']
    """
    return sorted(target for target, count in busy.items() if count >= per_target)


@dataclass(frozen=True)
class Delivery:
    id: str
    webhook_id: str
    owner_id: str
    payload: Any
    status: str
    attempts: int
    claims: int
    next_ms: int
    since_ms: int
    created_ms: int
    finished_ms: int | None
    last_status: int | None
    last_error: str | None


@dataclass(frozen=True)
class Webhook:
    id: str
    owner_id: str
    url: str
    name: str | None
    description: str | None
    active: bool
    created_at: int
    updated_at: int
