"""The resume and cancel URLs of runs paused by ``$.flow.delay``, ``suspend`` and ``rerun``.

``/flow/<run id>/resume/<secret>`` and ``/flow/<run id>/cancel/<secret>``, any method, no API
key: the secret is the credential (as Pipedream's URLs, which a browser or a callback opens).
The request (method, query, headers, body) goes with the run: a suspended step's
``$resume_data`` export is its body, a rerun step's ``$.context.run.callback_request`` all of
it. See docs/api.md, "Pausing a run".
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request

from sluice import errors
from sluice.api import render
from sluice.api.auth import PlatformDep
from sluice.domain import flow

router = APIRouter()

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
#: Credentials of the caller are not handed to the run.
_DROPPED = {"authorization", "cookie", "proxy-authorization"}


async def _request(request: Request) -> dict[str, Any]:
    raw = await request.body()
    body: Any = None
    if raw:
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return {
        "method": request.method,
        "query": dict(request.query_params),
        "headers": {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED},
        "body": body,
    }


async def signal(
    run_id: str, action: str, secret: str, request: Request, platform: PlatformDep
) -> dict[str, Any]:
    if action not in (flow.Action.RESUME, flow.Action.CANCEL):
        raise errors.NotFound("no such URL: /flow/<run id>/resume|cancel/<secret>")
    data = await _request(request)
    status = await platform.pauses.signal(run_id, flow.Action(action), secret, data)
    return render.flow_signal(run_id, status)


# One route per method: each needs its own OpenAPI operation id.
for _method in _METHODS:
    router.add_api_route(
        "/flow/{run_id}/{action}/{secret}",
        signal,
        methods=[_method],
        operation_id=f"flow_signal_{_method.lower()}",
    )
