"""User text storage cannot take as it is (``domain.text``): the faithful wrapper of JSON
columns, the U+FFFD of text columns and webhook events, and the checks of the API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.domain import http_events
from sluice.domain import text as t
from sluice.errors import InvalidRequest

chars = st.one_of(st.characters(), st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d"]))
texts = st.text(chars, max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10,
)


def storable(value: Any) -> bool:
    """What PostgreSQL's jsonb takes: UTF-8 text without NUL, escapes included."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\\u0000" not in text.replace("\\\\", "")


@given(values)
def test_a_stored_value_reads_back_as_it_was_and_is_storable(value: Any) -> None:
    stored = t.to_stored(value)
    assert storable(stored)
    assert t.from_stored(stored) == value


def test_clean_values_are_stored_as_they_are() -> None:
    value = {"a": ["b", 1, None, {"c": "\U0001f600"}]}
    assert t.to_stored(value) is value
    assert t.to_stored("\ud800") == {t.MARKER: '"\\ud800"'}
    assert t.to_stored({"k": "a\x00"}) == {t.MARKER: '{"k": "a\\u0000"}'}
    # A value shaped like the wrapper is wrapped too, so it reads back as itself.
    lookalike = {t.MARKER: "[1]"}
    assert t.from_stored(t.to_stored(lookalike)) == lookalike


@given(values)
def test_clean_json_leaves_no_nul_or_surrogate(value: Any) -> None:
    cleaned = t.clean_json(value)
    assert storable(cleaned)
    if storable(value):
        assert cleaned is value  # nothing to clean: no copy


def test_for_runner_keeps_nul() -> None:
    assert t.for_runner({"a": "x\x00\ud800"}) == {"a": "x\x00\ufffd"}
    same = {"a": ["x\x00"]}
    assert t.for_runner(same) is same


def test_json_problem_names_the_field() -> None:
    field, what = t.json_problem({"a": [1, {"b": "\ud800"}]}) or ("", "")
    assert field == "a.1.b" and "lone surrogate" in what
    assert (t.json_problem({"\udc00": 1}) or ("",))[0] == "\udc00"
    assert t.json_problem({"n": float("inf")}) == ("n", "a number too large for a 64-bit float")
    deep: Any = 1
    for _ in range(t.MAX_DEPTH):
        deep = [deep]
    assert t.json_problem(deep) is None and not t.too_deep(deep)
    assert t.json_problem([deep]) == (
        "0" + ".0" * (t.MAX_DEPTH - 1),
        "nesting deeper than 128 levels",
    )
    assert t.too_deep([deep])
    assert t.json_problem({"a": "\x00", "b": 10**400}) is None  # both are stored faithfully


@pytest.mark.parametrize(
    ("value", "problem"),
    [("a" * 301, "301 characters"), ("a\x00", "control"), ("a\ud800", "lone surrogate")],
)
def test_check_name(value: str, problem: str) -> None:
    t.check_name("a" * 300, "name", 300)
    with pytest.raises(InvalidRequest, match=problem) as caught:
        t.check_name(value, "name", 300)
    assert caught.value.field == "name"


@pytest.mark.parametrize(
    ("raw", "content_type", "body"),
    [
        (b'"\\ud800"', "application/json", "\ufffd"),
        (b'["\\uD83D\\uDE00", "\\uDE00"]', "application/json", ["\U0001f600", "\ufffd"]),
        (b"+2AA-", "text/plain; charset=utf-7", "\ufffd"),  # UTF-7 decodes to a surrogate
        (b"[1e400]", "application/json", "[1e400]"),  # beyond a double: the text
        (b"[" * 200 + b"]" * 200, "application/json", "[" * 200 + "]" * 200),
        (b"[" * 100_000, "application/json", "[" * 100_000),  # no RecursionError
    ],
)
def test_webhook_events_hold_only_storable_text(raw: bytes, content_type: str, body: Any) -> None:
    headers = [("Content-Type", content_type)]
    event = http_events.build_event("POST", "/", "", headers, raw)
    assert event["body"] == body
    assert storable(event)
    job = http_events.raw_request("POST", "/\ud800", "", headers, raw)
    assert storable(job) and http_events.event_of(job)["path"] == "/\ufffd"


def test_runner_messages_are_utf8_with_lone_surrogates_replaced() -> None:
    from sluice.runtime import protocol

    plain = {"call": {"event": "é\x00"}}
    assert json.loads(protocol.encode(plain)) == plain
    line = protocol.encode({"call": {"event": ["x\ud800", {"\udfff": 1}]}})
    assert line.endswith(b"\n") and json.loads(line) == {
        "call": {"event": ["x\ufffd", {"\ufffd": 1}]}
    }
