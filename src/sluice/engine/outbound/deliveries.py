"""The delivery worker: POSTs due webhook deliveries (``storage/deliveries.py``) and stores
each attempt's outcome, retrying with backoff for hours (``domain/deliveries.py``).

It has slots of its own, apart from the job worker's: ``concurrency`` deliveries in flight in
the process, at most ``per_webhook`` of them to one webhook (and three rounds of that
claimed), so a slow or unreachable URL holds only its own slots, never the account's job
slots nor other webhooks' deliveries. A claim leases a batch of due deliveries for
``lease_ms`` (time to wait for their webhook's slot and make the request); a worker that dies
leaves them due again after it, and one that stalls past it stores nothing (the claim count
fences it). Outcomes are stored many to a transaction. Failed attempts are logged once
each, at WARNING, without a stack: an unreachable URL is the receiver's trouble, not
Sluice's.

Tests drive it with ``run_once``/``drain`` and a fake clock; ``start``/``stop`` run the loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, metrics
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import deliveries as decide
from sluice.domain.deliveries import Delivery, DeliveryState, RetryPolicy, Webhook
from sluice.engine.outbound.webhooks import Attempt, Webhooks
from sluice.storage import database, deliveries
from sluice.storage import webhooks as hooks
from sluice.storage.deliveries import AttemptOutcome

log = logging.getLogger(__name__)

#: Outcomes stored in one transaction, at most before it commits.
SETTLE_BATCH = 64
#: A webhook's deliveries a worker claims ahead: this many rounds of its slots (one claim
#: per round, not per delivery), the first running, the others waiting their turn.
ROUNDS_HELD = 3


@dataclass(frozen=True)
class DeliveryConfig:
    concurrency: int = 64
    per_webhook: int = 8
    #: A claim's lease: waiting for the webhook's slot, then the request (its time limit).
    lease_ms: int = 60_000
    poll_seconds: float = 1.0
    #: Delivered ones are deleted this long after; 0 keeps them.
    retention_ms: int = 3_600_000
    prune_every_ms: int = 60_000
    #: Outcomes wait this long at most to share a transaction.
    settle_ms: float = 20.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def of(cls, settings: Settings) -> DeliveryConfig:
        timeout_ms = int(settings.delivery_timeout_seconds * 1000)
        return cls(
            concurrency=max(1, settings.delivery_concurrency),
            per_webhook=max(1, settings.delivery_per_webhook),
            # A claimed delivery waits for the rounds ahead of it, then makes its request.
            lease_ms=(ROUNDS_HELD + 1) * timeout_ms + 10_000,
            poll_seconds=settings.job_poll_seconds,
            retention_ms=settings.delivery_retention_seconds * 1000,
            policy=RetryPolicy(
                first_ms=int(settings.delivery_backoff_seconds * 1000),
                cap_ms=int(settings.delivery_backoff_max_seconds * 1000),
                max_age_ms=settings.delivery_max_age_seconds * 1000,
                max_attempts=settings.delivery_max_attempts,
            ),
        )


class DeliveryWorker:
    def __init__(
        self,
        db: AsyncEngine,
        clock: Clock,
        webhooks: Webhooks,
        config: DeliveryConfig | None = None,
        *,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.clock = clock
        self.webhooks = webhooks
        self.config = config or DeliveryConfig()
        #: The jitter's random draw in [0, 1) (a seeded one in tests).
        self.draw = draw
        self.writer = database.Writer(db)
        #: Outcomes not stored yet, and the task storing them (``_settle``).
        self._unsettled: list[AttemptOutcome] = []
        self._settler: asyncio.Task[None] | None = None
        self._flush = asyncio.Event()
        self.reader = database.Reader(db)
        #: Deliveries claimed and not settled, per webhook.
        self.held: collections.Counter[str] = collections.Counter()
        self._slots = asyncio.Semaphore(self.config.concurrency)
        #: Per webhook, its claimed deliveries not started, and the lanes taking them in
        #: turn (at most ``per_webhook``: its requests in flight).
        self._queues: dict[str, collections.deque[tuple[Delivery, Webhook | None]]] = {}
        self._lanes: dict[str, set[asyncio.Task[None]]] = {}
        #: Deliveries whose attempt is under way: ``id → claims``.
        self._in_flight: dict[str, int] = {}
        self._wake = asyncio.Event()
        #: Whether more may be due than the last claim took.
        self._more = True
        self._task: asyncio.Task[None] | None = None
        self._pruned_at = clock.now_ms()

    # ---- claims ------------------------------------------------------------------------------

    def notify(self) -> None:
        """Deliveries were stored in this process: look now, not at the next poll."""
        self._more = True
        self._wake.set()

    async def _claim(self) -> list[tuple[Delivery, Webhook | None]]:
        hold = ROUNDS_HELD * self.config.per_webhook
        room = self._room()
        if room <= 0:
            return []
        skip = decide.full(self.held, hold)
        now_ms, held = self.clock.now_ms(), dict(self.held)
        # Enough to fill a webhook's rounds and see a few others'; the loop claims again for more.
        lease_ms, limit = self.config.lease_ms, min(room, 2 * hold)

        def transaction(conn: Connection) -> tuple[list[Delivery], dict[str, Webhook], bool]:
            due = deliveries.due_sync(conn, now_ms=now_ms, limit=limit, skip=skip)
            picked = decide.pick([target for _, target in due], held, room, hold)
            chosen = [due[position][0] for position in picked]
            claimed = deliveries.claim_sync(conn, chosen, now_ms=now_ms, lease_ms=lease_ms)
            found = hooks.by_ids_sync(conn, {d.webhook_id for d in claimed})
            return claimed, found, len(due) >= limit or len(picked) < len(due)

        claimed, found, more = await self.writer(transaction)
        self._more = more and bool(claimed)
        for delivery in claimed:
            self.held[delivery.webhook_id] += 1
        return [(delivery, found.get(delivery.webhook_id)) for delivery in claimed]

    # ---- attempts ----------------------------------------------------------------------------

    def _start(self, delivery: Delivery, hook: Webhook | None) -> None:
        """Queue a claimed delivery for its webhook's lanes, starting a lane if it has fewer
        than ``per_webhook`` (a lane takes its webhook's deliveries one after another: no task
        per delivery)."""
        target = delivery.webhook_id
        queue = self._queues.get(target)
        if queue is None:
            queue = self._queues[target] = collections.deque()
        queue.append((delivery, hook))
        lanes = self._lanes.setdefault(target, set())
        alive = sum(1 for lane in lanes if not lane.done())
        if alive < min(self.config.per_webhook, len(queue)):
            lane = asyncio.create_task(self._lane(target, queue))
            lanes.add(lane)
            lane.add_done_callback(lanes.discard)

    async def _lane(
        self, target: str, queue: collections.deque[tuple[Delivery, Webhook | None]]
    ) -> None:
        while queue:
            delivery, hook = queue.popleft()
            self._in_flight[delivery.id] = delivery.claims
            try:
                async with self._slots:
                    self._settle(await self._attempt(delivery, hook))
            finally:
                del self._in_flight[delivery.id]
                self.held[target] -= 1
                left = self.held[target]
                if left <= 0:
                    del self.held[target]
                if left == self.config.per_webhook:
                    # Down to its last round: claim its next ones (if due) while these run,
                    # one claim per round or two rather than one per delivery.
                    self._more = True
                if self._more:  # a slot freed: the loop claims again
                    self._wake.set()
        # The last lane of the webhook out (no await since its queue was seen empty) drops
        # its entries; a delivery queued after this starts a new lane.
        current = asyncio.current_task()
        lanes = self._lanes.get(target, set())
        if not any(lane is not current and not lane.done() for lane in lanes):
            self._lanes.pop(target, None)
            if self._queues.get(target) is queue:
                del self._queues[target]

    def _tasks(self) -> list[asyncio.Task[None]]:
        """The lanes running now."""
        return [lane for lanes in self._lanes.values() for lane in lanes if not lane.done()]

    def _settle(self, outcome: AttemptOutcome) -> None:
        """Store the outcome with the others of this moment, in one transaction (by a task of
        its own: the slot is free meanwhile; the lease keeps the delivery from other claims)."""
        self._unsettled.append(outcome)
        if len(self._unsettled) >= SETTLE_BATCH:
            self._flush.set()
        if self._settler is None:
            self._settler = asyncio.create_task(self._store_outcomes())

    async def _store_outcomes(self) -> None:
        try:
            # The outcomes of the attempts ending meanwhile join this transaction (one commit
            # for many, rather than one a delivery): up to ``settle_ms``, or until a batch is
            # full or ``settled()`` is awaited.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.settle_ms / 1000):
                    await self._flush.wait()
            while self._unsettled:
                self._flush.clear()
                batch, self._unsettled = self._unsettled, []
                try:
                    await self.writer(functools.partial(deliveries.settle_sync, outcomes=batch))
                except errors.NotReady as exc:
                    # The database is away: these run again after their leases (at least once).
                    log.warning(
                        "could not store %d deliveries' outcomes (%s); tried again after their "
                        "leases",
                        len(batch),
                        exc,
                        extra={"action": "deliveries_unsettled"},
                    )
                except Exception:
                    log.exception(
                        "could not store %d deliveries' outcomes; tried again after their leases",
                        len(batch),
                        extra={"action": "deliveries_unsettled"},
                    )
        finally:
            self._flush.clear()
            self._settler = None

    async def settled(self) -> None:
        """Until every outcome so far is stored (at once: no batching wait)."""
        while self._settler is not None:
            self._flush.set()
            await asyncio.shield(self._settler)

    async def _attempt(self, delivery: Delivery, hook: Webhook | None) -> AttemptOutcome:
        now_ms = self.clock.now_ms()
        if hook is None or not hook.active:
            # A webhook deleted takes its deliveries with it (cascade); an inactive one keeps
            # them dead, to retry once it is active again.
            return AttemptOutcome(delivery.id, delivery.claims, DeliveryState.DEAD, now_ms,
                           error="the webhook is inactive")  # fmt: skip
        try:
            attempt = await self.webhooks.post(hook, delivery)
        except Exception as exc:  # a bug here must not lose the delivery: tried again
            log.exception("delivery attempt crashed", extra={"delivery_id": delivery.id})
            attempt = Attempt(error=f"internal error: {type(exc).__name__}")
        now_ms = self.clock.now_ms()
        if attempt.ok:
            metrics.delivery_attempt("delivered")
            return AttemptOutcome(delivery.id, delivery.claims, DeliveryState.DELIVERED, now_ms,
                           http_status=attempt.http_status)  # fmt: skip
        error = attempt.error or f"the URL answered {attempt.http_status}"
        at = decide.next_attempt_ms(
            self.config.policy,
            attempts=delivery.attempts,
            since_ms=delivery.since_ms,
            now_ms=now_ms,
            draw=self.draw(),
        )
        state = DeliveryState.PENDING if at is not None else DeliveryState.DEAD
        metrics.delivery_attempt("failed" if at is not None else "dead")
        log.warning(
            "webhook delivery %s to %s failed (attempt %d): %s; %s",
            delivery.id,
            hook.id,
            delivery.attempts,
            error,
            "retrying" if at is not None else "no retries left: dead",
            extra={
                "action": "delivery_failed" if at is not None else "delivery_dead",
                "delivery_id": delivery.id,
                "webhook_id": hook.id,
                "owner_id": delivery.owner_id,
                "attempt": delivery.attempts,
                "http_status": attempt.http_status,
                "retry_at_ms": at,
            },
        )
        return AttemptOutcome(delivery.id, delivery.claims, state, now_ms, next_ms=at,
                       http_status=attempt.http_status, error=error)  # fmt: skip

    # ---- driving it --------------------------------------------------------------------------

    async def run_once(self) -> int:
        """Claim the due deliveries (as many as the slots take) and make their attempts; the
        number attempted."""
        claimed = await self._claim()
        for delivery, hook in claimed:
            self._start(delivery, hook)
        while lanes := self._tasks():
            await asyncio.gather(*lanes)
        await self.settled()
        return len(claimed)

    async def drain(self) -> int:
        """Attempt deliveries until none is due now (tests)."""
        total = 0
        while count := await self.run_once():
            total += count
        return total

    async def prune(self) -> int:
        self._pruned_at = now_ms = self.clock.now_ms()
        if self.config.retention_ms <= 0:
            return 0
        before = now_ms - self.config.retention_ms
        return await self.writer(
            lambda conn: deliveries.prune_sync(conn, finished_before_ms=before, limit=2000)
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def _room(self) -> int:
        """Deliveries a claim may take now: twice the slots, less those held."""
        return 2 * self.config.concurrency - sum(self.held.values())

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            if self._more and self._room() > 0:
                try:
                    for delivery, hook in await self._claim():
                        self._start(delivery, hook)
                except errors.NotReady as exc:  # the database is away: the next poll tries
                    log.warning(
                        "the delivery worker could not claim deliveries: %s",
                        exc,
                        extra={"action": "deliveries_unclaimed"},
                    )
                    self._more = False
                except Exception:
                    log.exception("the delivery worker failed to claim deliveries")
                    self._more = False
                if self._more and self._room() > 0:
                    continue
            if self.clock.now_ms() - self._pruned_at >= self.config.prune_every_ms:
                try:
                    await self.prune()
                except Exception:
                    log.exception("the delivery worker failed to prune delivered deliveries")
            await self._idle()

    async def _idle(self) -> None:
        """Until woken (stored here; a slot freed while more is due), the next delivery is
        due, or a poll passed."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
        if not self._more:
            now_ms = self.clock.now_ms()
            try:
                due = await self.reader(lambda conn: deliveries.next_due_sync(conn, now_ms=now_ms))
            except Exception:
                due = None
            if due is not None:
                waits.add(asyncio.ensure_future(self.clock.sleep_until(due)))
        try:
            await asyncio.wait(
                waits, timeout=self.config.poll_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiting in waits:
                waiting.cancel()
        # Woken, due, or polled (other processes may have stored some): look again.
        self._more = True

    async def stop(self, grace_seconds: float = 0.0) -> None:
        """Stop claiming; attempts in flight get ``grace_seconds``, then are cut off and
        their deliveries made due again at once (their attempt not counted)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        lanes = self._tasks()
        if lanes and grace_seconds > 0:
            # The lanes go on with their queues meanwhile: what they started in time ends.
            await asyncio.wait(lanes, timeout=grace_seconds)
        # Cut off: the attempts under way, and the claimed ones not started.
        cut = list(self._in_flight.items()) + [
            (delivery.id, delivery.claims)
            for queue in self._queues.values()
            for delivery, _hook in queue
        ]
        lanes = self._tasks()
        for lane in lanes:  # all at once: none starts another delivery meanwhile
            lane.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        await self.settled()
        if cut:
            now_ms = self.clock.now_ms()
            try:
                await self.writer(lambda conn: deliveries.release_sync(conn, cut, now_ms=now_ms))
            except Exception:
                log.exception("could not release %d deliveries; due after their leases", len(cut))
        self.writer.dispose()
        self.reader.dispose()
