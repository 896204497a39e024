"""Webhooks (``wh_…``), as Pipedream's: a URL that subscriptions deliver events to
(``POST /v1/webhooks``; a subscription with ``listener_id=wh_…``). Each delivery is an ``emit``
job (``handlers/emit.py``): the emitted payload is POSTed as JSON to the URL, under the egress
rules of ``$.send.http``; a failure or a non-2xx answer fails the job, which runs again with
backoff and is kept, failed, after its last attempt (docs/api.md, "Webhooks")."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import text
from sluice.engine import destinations, outbound
from sluice.storage import subscriptions
from sluice.storage import webhooks as store
from sluice.storage.jobs import Job
from sluice.storage.webhooks import Webhook

log = logging.getLogger(__name__)

#: Webhooks per account, at most.
MAX_WEBHOOKS = 100


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


class Webhooks:
    def __init__(self, db: AsyncEngine, settings: Settings, clock: Clock) -> None:
        self.db, self.settings, self.clock = db, settings, clock
        self.egress = outbound.policy(settings)

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
        """The webhook, and the subscriptions that deliver to it."""
        async with self.db.begin() as conn:
            if not await store.delete(conn, owner_id, webhook_id):
                raise errors.NotFound(f"webhook {webhook_id} not found")
            await subscriptions.delete_for_source(conn, webhook_id)

    async def deliver(self, job: Job) -> None:
        """POST one delivered event to the webhook's URL; raises ``DeliveryFailed`` (the job
        runs again) unless it answered 2xx. A webhook deleted meanwhile: nothing to do."""
        hook = await self.get(job.owner_id, job.target_id)
        if hook is None or not hook.active:
            return
        payload: dict[str, Any] = job.payload or {}
        headers = {
            "X-Sluice-Event-Id": str(payload.get("event_id") or ""),
            "X-Sluice-Emitter-Id": str(payload.get("emitter_id") or ""),
            "X-Sluice-Channel": str(payload.get("channel") or ""),
        }
        config = {
            "url": hook.url,
            "method": "POST",
            "headers": {**headers, "Content-Type": "application/json"},
            "data": json.dumps(payload.get("event"), ensure_ascii=False),
        }
        outcome = await destinations.send_http(
            config, time_limit=self.settings.send_http_timeout_seconds, policy=self.egress
        )
        if outcome["status"] != "sent" or not outcome["ok"]:
            why = outcome.get("error") or f"the URL answered {outcome.get('http_status')}"
            raise errors.DeliveryFailed(
                f"webhook {hook.id}: {str(why).replace('$.send.http: ', '')}"
            )
