"""Is this process able to work (``/readyz``), and the queue's gauges for ``/metrics``."""

from __future__ import annotations

import asyncio
import logging

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, metrics
from sluice.runtime.pool import RunnerPool
from sluice.storage import deliveries, job_stats

log = logging.getLogger(__name__)

#: A database that does not answer a trivial query in this long is not ready.
CHECK_SECONDS = 5.0


async def ready(db: AsyncEngine, pool: RunnerPool) -> None:
    """Raises ``errors.NotReady`` naming what is wrong: the database does not answer, or the
    runner pool is closed (the process is stopping)."""
    try:
        async with asyncio.timeout(CHECK_SECONDS), db.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except (OSError, TimeoutError, sa.exc.SQLAlchemyError, errors.StorageUnavailable) as exc:
        log.warning("not ready: the database does not answer", extra={"action": "readyz"})
        raise errors.NotReady(f"the database does not answer: {type(exc).__name__}") from exc
    if not pool.usable:
        raise errors.NotReady("the Node runner pool is closed: this process is stopping")


async def read_queue(db: AsyncEngine, now_ms: int) -> None:
    """Read the shared queue into the metrics' gauges (every process sees the same queue)."""
    async with db.connect() as conn:
        stats = await job_stats.read(conn, now_ms)
        metrics.set_deliveries(await deliveries.state_counts(conn))
    oldest_s = 0.0 if stats.oldest_due_ms is None else (now_ms - stats.oldest_due_ms) / 1000
    metrics.set_queue(stats.counts, oldest_s)
