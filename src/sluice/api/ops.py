"""For operators and orchestrators, outside ``/v1``: ``/healthz`` (the process answers),
``/readyz`` (it can work: the database answers, the runner pool is open) and ``/metrics``
(Prometheus text format; ``SLUICE_METRICS_TOKEN`` guards it when set). docs/deploy.md."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sluice import errors, metrics
from sluice.api.auth import PlatformDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, Any]:
    """The process is up and answering (liveness): no database call."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(platform: PlatformDep) -> dict[str, Any]:
    """The process can work (readiness): 503 ``not_ready`` names what is missing."""
    await platform.ready()
    return {"status": "ready", "role": platform.settings.role}


_TEXT = {"text/plain": {"schema": {"type": "string"}}}


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"description": "Prometheus text format 0.0.4.", "content": _TEXT}},
)
async def prometheus(request: Request, platform: PlatformDep) -> Response:
    """This process's counters and the shared job queue, in Prometheus text format."""
    token = platform.settings.metrics_token
    if token:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            raise errors.Unauthorized("GET /metrics needs 'Authorization: Bearer <metrics token>'")
    await platform.read_queue()
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
