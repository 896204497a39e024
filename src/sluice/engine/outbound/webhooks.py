"""Webhooks (``wh_…``), as Pipedream's: a URL that subscriptions deliver events to
(``POST /v1/webhooks``; a subscription with ``listener_id=wh_…``).

Each event a webhook hears is a *delivery* (``dlv_…``, stored with the event:
``engine/state/commit.py``), POSTed as JSON to the URL under the egress rules of ``$.send.http``
by the delivery worker (``engine/outbound/deliveries.py``), tried again with backoff for hours, then
kept dead until retried (docs/deploy.md, "Webhook deliveries"). Every attempt carries the
delivery's id as ``Idempotency-Key``, so a receiver can drop the doubles at-least-once brings.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import text
from sluice.domain.deliveries import Delivery, DeliveryState, Webhook
from sluice.engine.outbound import http_clients
from sluice.storage import deliveries, subscriptions
from sluice.storage import webhooks as store
from sluice.storage.deliveries import NewDelivery
from sluice.storage.jobs import Job

log = logging.getLogger(__name__)

#: Webhooks per account, at most.
MAX_WEBHOOKS = 100
#: An answer's body up to this size is read (and dropped), so its connection is kept alive.
KEEP_ALIVE_BODY = 65_536
#: Deliveries one listing returns, at most.
MAX_PAGE = 100


def check_url(url: str) -> str:
    """An http(s) URL with a host, at most 2,000 characters (where it points is the egress
    policy's question, asked at each delivery)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise errors.InvalidRequest("url must be an http(s) URL with a host", field="url")
    if len(url) > 2000:
        raise errors.InvalidRequest("url is longer than 2000 characters", field="url")
    return url


def new_delivery(owner_id: str, webhook_id: str, payload: dict[str, Any]) -> NewDelivery:
    """A delivery of an event (``payload``: event_id, emitter_id, channel, event) to a
    webhook, to store due now in the transaction storing the event
    (``storage.deliveries.insert_many_sync``)."""
    return NewDelivery(ids.new_id("dlv"), webhook_id, owner_id, payload)


@dataclass(frozen=True)
class Attempt:
    """One POST's outcome: the answer's status, or why none came."""

    http_status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.http_status is not None and 200 <= self.http_status < 300


def headers(delivery: Delivery) -> dict[str, str]:
    """The headers of an attempt. ``Idempotency-Key`` and ``X-Sluice-Delivery-Id`` are the
    delivery's id, the same in every attempt of it (and after a retry by hand)."""
    payload: dict[str, Any] = delivery.payload or {}
    return {
        "Content-Type": "application/json",
        "User-Agent": "Sluice",
        "Idempotency-Key": delivery.id,
        "X-Sluice-Delivery-Id": delivery.id,
        "X-Sluice-Delivery-Attempt": str(delivery.attempts),
        "X-Sluice-Event-Id": str(payload.get("event_id") or ""),
        "X-Sluice-Emitter-Id": str(payload.get("emitter_id") or ""),
        "X-Sluice-Channel": str(payload.get("channel") or ""),
    }


class Webhooks:
    def __init__(
        self, db: AsyncEngine, settings: Settings, clock: Clock, clients: http_clients.Clients
    ) -> None:
        self.db, self.settings, self.clock = db, settings, clock
        #: Parsed once: a bad SLUICE_EGRESS_ALLOW fails at start, not at the first delivery.
        self.egress = http_clients.policy(settings)
        #: The process's shared clients (one per egress policy; closed by the platform).
        self.clients = clients

    async def create(
        self, owner_id: str, url: str, name: str | None, description: str | None
    ) -> Webhook:
        check_url(url)
        text.check_name(name, "name", 200)
        text.check_name(description, "description", 2000)
        now_s = self.clock.now_ms() // 1000
        hook = Webhook(ids.new_id("wh"), owner_id, url, name, description, True, now_s, now_s)
        async with self.db.begin() as conn:
            if await store.count(conn, owner_id) >= MAX_WEBHOOKS:
                raise errors.Conflict(f"an account has at most {MAX_WEBHOOKS} webhooks")
            await store.insert(conn, hook)
        return hook

    async def list(self, owner_id: str) -> list[Webhook]:
        async with self.db.connect() as conn:
            return await store.list_for(conn, owner_id)

    async def get(self, owner_id: str, webhook_id: str) -> Webhook | None:
        async with self.db.connect() as conn:
            return await store.get(conn, owner_id, webhook_id)

    async def delete(self, owner_id: str, webhook_id: str) -> None:
        """The webhook, its deliveries, and the subscriptions that deliver to it."""
        async with self.db.begin() as conn:
            if not await store.delete(conn, owner_id, webhook_id):
                raise errors.NotFound(f"webhook {webhook_id} not found")
            await subscriptions.delete_for_source(conn, webhook_id)

    async def deliveries(
        self,
        owner_id: str,
        webhook_id: str,
        *,
        status: str | None = None,
        limit: int = MAX_PAGE,
        before: str | None = None,
    ) -> builtins.list[Delivery]:
        """The webhook's deliveries, newest first: pending (due, or in flight), dead, and
        the delivered ones of the last ``SLUICE_DELIVERY_RETENTION_SECONDS``."""
        if status is not None and status not in tuple(DeliveryState):
            raise errors.InvalidRequest(
                f"status must be one of {', '.join(DeliveryState)}", field="status"
            )
        if not 1 <= limit <= MAX_PAGE:
            raise errors.InvalidRequest(f"limit must be 1 to {MAX_PAGE}", field="limit")
        async with self.db.connect() as conn:
            if await store.get(conn, owner_id, webhook_id) is None:
                raise errors.NotFound(f"webhook {webhook_id} not found")
            return await deliveries.list_for(
                conn, owner_id, webhook_id, status=status, limit=limit, before=before
            )

    async def counts(self, owner_id: str) -> dict[tuple[str, str], int]:
        """``(webhook_id, status) → count`` of the account's deliveries."""
        async with self.db.connect() as conn:
            return await deliveries.counts(conn, owner_id)

    async def retry(
        self, owner_id: str, webhook_id: str, delivery_ids: Sequence[str] | None = None
    ) -> builtins.list[str]:
        """Dead deliveries (those given, else all of the webhook's) pending again, due now,
        with a new retry schedule and the same id; the ids retried. A given id that is not a
        dead delivery of the webhook: ``NotFound`` / ``Conflict``, nothing retried."""
        now_ms = self.clock.now_ms()
        async with self.db.begin() as conn:
            if await store.get(conn, owner_id, webhook_id) is None:
                raise errors.NotFound(f"webhook {webhook_id} not found")
            for delivery_id in delivery_ids or ():
                found = await deliveries.get(conn, owner_id, delivery_id)
                if found is None or found.webhook_id != webhook_id:
                    raise errors.NotFound(
                        f"delivery {delivery_id} of webhook {webhook_id} not found"
                    )
                if found.status != DeliveryState.DEAD:
                    raise errors.Conflict(
                        f"delivery {delivery_id} is {found.status}: only a dead one is retried"
                    )
            retried = await deliveries.retry(
                conn, owner_id, webhook_id, now_ms=now_ms, delivery_ids=delivery_ids
            )
        if retried:
            log.info(
                "deliveries retried",
                extra={"action": "deliveries_retried", "webhook_id": webhook_id,
                       "count": len(retried)},
            )  # fmt: skip
        return retried

    async def post(self, hook: Webhook, delivery: Delivery) -> Attempt:
        """POST the delivery's event to the webhook's URL once (under the egress policy, on
        the process's shared delivery client, ``engine/outbound/posts.py``); never raises for what
        the URL or the network did."""
        payload: dict[str, Any] = delivery.payload or {}
        body = json.dumps(payload.get("event"), ensure_ascii=False).encode()
        limit = self.settings.delivery_timeout_seconds
        from sluice.engine.outbound import posts  # loaded by ``poster`` (its docstring says why)

        poster = self.clients.poster(self.egress)
        try:
            status = await poster.post(
                hook.url,
                body,
                headers(delivery),
                time_limit=limit,
                # Only the status matters; a short body is read so that the connection is
                # kept for the next delivery (one left unread is closed), a long one is not.
                read_limit=KEEP_ALIVE_BODY,
            )
            return Attempt(http_status=status)
        except errors.EgressRefused as exc:
            return Attempt(error=f"refused: {http_clients.explain(exc)}")
        except TimeoutError:
            return Attempt(error=f"timed out after {limit:g} s")
        except posts.ERRORS as exc:
            return Attempt(error=posts.failure(exc))

    async def accept(self, job: Job, finish: Callable[[Connection], None]) -> None:
        """An ``emit`` job to a webhook (queued before deliveries had their own table, or by
        a path that still makes one): made a delivery, in the transaction marking it done."""
        payload: dict[str, Any] = job.payload or {}
        now_ms = self.clock.now_ms()
        async with self.db.begin() as conn:
            if await store.get(conn, job.owner_id, job.target_id) is None:
                return  # deleted meanwhile: the worker marks the job done

            def transaction(sync: Connection) -> None:
                made = new_delivery(job.owner_id, job.target_id, payload)
                deliveries.insert_many_sync(sync, [made], now_ms=now_ms)
                finish(sync)

            await conn.run_sync(transaction)
