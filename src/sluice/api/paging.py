"""Pipedream's list shapes: resources (base64url-of-id cursors) and events (``<ms>-<seq>``
ids as cursors), both answered as ``{page_info, data}``."""

from __future__ import annotations

from typing import Any

from sluice import errors, ids
from sluice.platform import Event, Page, Platform

#: The spec: the newest 100 events of a source (errors of a workflow) are served.
EVENT_WINDOW = 100


def cursors(before: str | None, after: str | None, prefix: str) -> tuple[str | None, str | None]:
    """The resource ids behind ``before``/``after`` cursors of ``prefix`` resources."""
    decoded: dict[str, str | None] = {"before": None, "after": None}
    for name, value in (("before", before), ("after", after)):
        if value is not None:
            resource_id = ids.decode_cursor(value)
            if resource_id is None or not ids.has_prefix(resource_id, prefix):
                raise errors.InvalidRequest(f"{name} is not a cursor from page_info", field=name)
            decoded[name] = resource_id
    return decoded["before"], decoded["after"]


def body(data: list[dict[str, Any]], total_count: int) -> dict[str, Any]:
    return {
        "page_info": {
            "total_count": total_count,
            "count": len(data),
            "start_cursor": ids.encode_cursor(data[0]["id"]) if data else None,
            "end_cursor": ids.encode_cursor(data[-1]["id"]) if data else None,
        },
        "data": data,
    }


def event_position(value: str | None, name: str) -> tuple[int, int] | None:
    """An event id given as a cursor (``before``, ``after``, ``Last-Event-ID``…), parsed."""
    if value is None:
        return None
    parsed = ids.parse_event_id(value)
    if parsed is None:
        raise errors.InvalidRequest(
            f"{name} must be an event id such as 1606370816223-0", field=name
        )
    return parsed


def id_body(data: list[dict[str, Any]], total_count: int) -> dict[str, Any]:
    """``page_info`` whose cursors are the items' own ids (events, runs)."""
    return {
        "page_info": {
            "total_count": total_count,
            "count": len(data),
            "start_cursor": data[0]["id"] if data else None,
            "end_cursor": data[-1]["id"] if data else None,
        },
        "data": data,
    }


def check_expand(expand: str | None) -> bool:
    """``expand=event`` (the only value event lists take): whether it was given."""
    if expand not in (None, "", "event"):
        raise errors.InvalidRequest("expand accepts only 'event'", field="expand")
    return expand == "event"


async def event_page(
    platform: Platform,
    emitter_id: str,
    *,
    channel: str | None,
    limit: int,
    before: str | None,
    after: str | None,
) -> Page[Event]:
    """The newest 100 events of an emitter (one channel's when given), a page of them by
    ``before``/``after`` event ids: the spec's event and error lists."""
    return await platform.events.page(
        emitter_id,
        channel=channel,
        limit=limit,
        window=EVENT_WINDOW,
        before=event_position(before, "before"),
        after=event_position(after, "after"),
    )
