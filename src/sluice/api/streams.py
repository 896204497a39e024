"""Server-sent events: ``/v1/sources/{id}/sse`` (emits) and ``/v1/sources/{id}/logs/sse``.

Each message is unnamed (a browser's ``onmessage`` gets it) with ``id:`` set, so an
``EventSource`` that reconnects sends ``Last-Event-ID`` and resumes where it stopped. A
``: keepalive`` comment goes out every ``sse_keepalive_seconds``. See docs/api.md, "SSE".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from sluice import errors
from sluice.api import bodies, paging, render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.platform import Platform, Stream

router = APIRouter()

LastEventId = Annotated[str | None, Header(description="Resume after this id (sent on reconnect).")]


def _log_position(value: str | None, field: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or len(value) > 18:
        raise errors.InvalidRequest(f"{field} must be a log line id (an integer)", field=field)
    return int(value)


def _response(
    platform: Platform, stream: Stream, shape: Callable[[Any], dict[str, Any]]
) -> EventSourceResponse:
    """``shape``: the wire form of each item (``render.emitted``, ``render.log_stream_line``)."""

    async def messages() -> Any:
        async for message_id, item in stream.items():
            data = bodies.dumps(shape(item))
            yield ServerSentEvent(data, id=message_id, sep="\n")

    return EventSourceResponse(
        messages(),
        ping=platform.settings.sse_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
        sep="\n",
        # Also when the body never starts (HEAD, a client gone at once): drop the subscription.
        background=BackgroundTask(stream.close),
    )


@router.get("/v1/sources/{source_id}/sse", response_class=EventSourceResponse)
async def emits(
    source_id: str,
    account: AccountDep,
    platform: PlatformDep,
    last_event_id: LastEventId = None,
    after: str | None = None,
    event_name: str | None = None,
) -> EventSourceResponse:
    """Each event the source emits, as it is stored: ``data: {"k": "emit", "e": <payload>,
    "ts", "id", "name", "metadata"}``. ``Last-Event-ID`` (or ``?after=``) first replays the
    stored events after that id, among the newest 100; ``?event_name=`` keeps one channel."""
    field = "Last-Event-ID" if last_event_id is not None else "after"
    position = paging.event_position(last_event_id if last_event_id is not None else after, field)
    deployment = await platform.sources.get(account.id, source_id)
    stream = platform.open_emits(deployment.id, after=position, channel=event_name)
    return _response(platform, stream, render.emitted)


@router.get("/v1/sources/{source_id}/logs/sse", response_class=EventSourceResponse)
async def logs(
    source_id: str,
    account: AccountDep,
    platform: PlatformDep,
    last_event_id: LastEventId = None,
    after: str | None = None,
) -> EventSourceResponse:
    """Each log line of the source (console output, thrown errors), as it is stored:
    ``data: {"k": "log", "level", "msg", "ts", "invocation_id", "id"}``; resumable likewise
    (``?after=0`` replays the newest 100)."""
    field = "Last-Event-ID" if last_event_id is not None else "after"
    position = _log_position(last_event_id if last_event_id is not None else after, field)
    deployment = await platform.sources.get(account.id, source_id)
    stream = platform.open_logs(deployment.id, after=position)
    return _response(platform, stream, render.log_stream_line)
