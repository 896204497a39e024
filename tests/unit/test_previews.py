"""An event's preview in an event list without ``expand=event``: whole up to 1 KB, else cut
to fit in it, keeping its shape."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sluice.domain import previews

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=40,
)


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@given(JSON, st.integers(min_value=16, max_value=300))
def test_a_preview_fits_and_is_the_event_when_small(value: Any, limit: int) -> None:
    shown, cut = previews.preview(value, max_bytes=limit)
    assert cut == (size(value) > limit)
    if not cut:
        assert shown == value
    elif shown is not None:
        assert size(shown) <= limit
        assert type(shown) is type(value)


def test_nested_events_keep_their_small_fields() -> None:
    event = {"id": 7, "body": {"html": "<p>" * 2000, "subject": "hi"}, "tags": list(range(500))}
    shown, cut = previews.preview(event)
    assert cut and size(shown) <= previews.MAX_BYTES
    assert shown["id"] == 7 and shown["body"]["subject"] == "hi"
    assert shown["body"]["html"].endswith("…")
    assert shown["tags"] == list(range(len(shown["tags"])))
