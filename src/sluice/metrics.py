"""The Prometheus metrics of one Sluice process (``GET /metrics``, docs/deploy.md).

Counted where things happen, by a one-line call into this module; the queue's gauges are read
from the database when scraped (``engine/health.py``). Labels are kinds, codes and statuses,
never an account, a source or a workflow: every account's numbers are summed, so the page shows
no one's data. Beside the layers, like ``clock.py``: any layer may call it; it imports none.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)

# No ``*_created`` series beside each counter: timestamps nobody graphs, doubling the page.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)

#: The answer's media type (Prometheus text format 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REQUESTS = Counter(
    "sluice_http_requests",
    "HTTP requests answered, by kind (api: /v1 and the rest; endpoint: /e/…) and status.",
    ["kind", "status"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "sluice_errors",
    "Errors by kind (api: an error answer, by its code; run: an invocation that failed, by "
    "its error code).",
    ["kind", "code"],
    registry=REGISTRY,
)
RUNS = Counter(
    "sluice_runs",
    "Invocations of user code finished, by kind (run: a source's run, hook, workflow, action, "
    "options, inspect) and outcome (ok, error).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
RUN_SECONDS = Histogram(
    "sluice_run_duration_seconds",
    "Wall-clock time of one invocation of user code, by kind.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
RUNNER_RESTARTS = Counter(
    "sluice_runner_restarts",
    "Node runners started again after the account's previous runner died.",
    registry=REGISTRY,
)
LIMIT_HITS = Counter(
    "sluice_sandbox_limit_hits",
    "Invocations stopped by a limit: TIMEOUT, OUT_OF_MEMORY, EMIT_LIMIT, DB_LIMIT.",
    ["limit"],
    registry=REGISTRY,
)
JOBS = Gauge(
    "sluice_jobs",
    "Jobs in the shared queue now, by state (queued: due or waiting to retry; running) and kind.",
    ["state", "kind"],
    registry=REGISTRY,
)
OLDEST_JOB = Gauge(
    "sluice_job_oldest_queued_age_seconds",
    "How long the oldest due queued job has waited (0 when none is due): the queue's lag.",
    registry=REGISTRY,
)
DELIVERIES = Gauge(
    "sluice_webhook_deliveries",
    "Webhook deliveries stored now, by state (pending: due, in flight or waiting to retry; "
    "dead: every retry failed; delivered: kept for SLUICE_DELIVERY_RETENTION_SECONDS).",
    ["state"],
    registry=REGISTRY,
)
DELIVERY_ATTEMPTS = Counter(
    "sluice_webhook_delivery_attempts",
    "Webhook delivery attempts made by this process, by outcome (delivered; failed: tried "
    "again later; dead: the last one).",
    ["outcome"],
    registry=REGISTRY,
)
WAL_BYTES = Gauge(
    "sluice_sqlite_wal_bytes",
    "Size of SQLite's write-ahead log file after the last checkpoint (SQLite only).",
    registry=REGISTRY,
)
CHECKPOINTS = Counter(
    "sluice_sqlite_checkpoints",
    "SQLite checkpoints run, by mode (passive; truncate: the WAL was over its bound or the "
    "disk nearly full).",
    ["mode"],
    registry=REGISTRY,
)
SHED = Counter(
    "sluice_requests_refused",
    "Endpoint requests refused before they were stored, by reason (overloaded: the account's "
    "backlog is too old; disk_reserve: the disk is down to its reserve).",
    ["reason"],
    registry=REGISTRY,
)

#: The error codes of the runtime's and the engine's limits (docs/errors.md).
LIMITS = frozenset({"TIMEOUT", "OUT_OF_MEMORY", "EMIT_LIMIT", "DB_LIMIT"})


# The children of the series counted on every request and run, by label values: ``labels()``
# locks and builds a key on each call. Label values are kinds, statuses and codes: few.
_requests: dict[tuple[str, int], Any] = {}
_runs: dict[tuple[str, bool], tuple[Any, Any]] = {}


def request(kind: str, status: int) -> None:
    child = _requests.get((kind, status))
    if child is None:
        child = _requests[(kind, status)] = REQUESTS.labels(kind, str(status))
    child.inc()


def api_error(code: str) -> None:
    ERRORS.labels("api", code).inc()


def invocation(kind: str, seconds: float, error_code: str | None) -> None:
    """One invocation of user code ended (``runtime/pool.py``); ``error_code`` when it failed."""
    children = _runs.get((kind, bool(error_code)))
    if children is None:
        children = _runs[(kind, bool(error_code))] = (
            RUNS.labels(kind, "error" if error_code else "ok"),
            RUN_SECONDS.labels(kind),
        )
    children[0].inc()
    children[1].observe(seconds)
    if error_code:
        ERRORS.labels("run", error_code).inc()
        limit_hit(error_code)


def limit_hit(code: str) -> None:
    if code in LIMITS:
        LIMIT_HITS.labels(code).inc()


def runner_restarted() -> None:
    RUNNER_RESTARTS.inc()


def set_queue(counts: dict[tuple[str, str], int], oldest_age_s: float) -> None:
    """The queue as just read: ``{(state, kind): count}`` and the oldest due job's wait."""
    JOBS.clear()
    for (state, kind), count in counts.items():
        JOBS.labels(state, kind).set(count)
    OLDEST_JOB.set(max(0.0, oldest_age_s))


def set_deliveries(counts: dict[str, int]) -> None:
    """The deliveries as just read: ``{state: count}``."""
    for state in ("pending", "dead", "delivered"):
        DELIVERIES.labels(state).set(counts.get(state, 0))


_attempts: dict[str, Any] = {}


def delivery_attempt(outcome: str) -> None:
    child = _attempts.get(outcome)
    if child is None:
        child = _attempts[outcome] = DELIVERY_ATTEMPTS.labels(outcome)
    child.inc()


def wal_checkpointed(mode: str, wal_bytes: int, _seconds: float) -> None:
    CHECKPOINTS.labels(mode).inc()
    WAL_BYTES.set(wal_bytes)


def refused(reason: str) -> None:
    SHED.labels(reason).inc()


def serve(host: str, port: int) -> None:
    """Serve this registry on ``http://host:port/metrics`` from a thread: the worker role,
    which has no API (its queue gauges are read by the api processes, which see the same
    queue)."""
    start_http_server(port, addr=host, registry=REGISTRY)


def exposition() -> bytes:
    return generate_latest(REGISTRY)
