"""The HTTP endpoint's pure parts about a request: the event it becomes and the token bucket
(Hypothesis against simple models). The answers are ``test_http_answers.py``'s."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlencode

from hypothesis import example, given
from hypothesis import strategies as st

from sluice.domain import http_events as h

JSON_CT = [("Content-Type", "application/json")]

texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def event(content_type: str | None, raw: bytes, **kw: Any) -> dict[str, Any]:
    headers = [("Content-Type", content_type)] if content_type else []
    return h.build_event(
        kw.get("method", "post"), kw.get("path", "/"), kw.get("query", ""), headers, raw
    )


@given(json_values)
def test_a_json_body_is_parsed(value: Any) -> None:
    raw = json.dumps(value).encode()
    built = h.build_event("POST", "/", "", JSON_CT, raw)
    assert built["body"] == value
    assert built["bodyRaw"] == raw.decode()


def test_json_types_and_invalid_json() -> None:
    assert event("application/vnd.api+json; charset=utf-8", b'{"a":1}')["body"] == {"a": 1}
    assert event("application/json", b"{oops")["body"] == "{oops"
    assert event("application/json", b"NaN")["body"] == "NaN"  # not JSON: kept as text
    # No JSON store or JSON.parse takes these back: the body stays text (the one decoder of
    # every request keeps its hooks).
    assert event("application/json", b'{"a": Infinity}')["body"] == '{"a": Infinity}'
    assert event("application/json", b"[1e400]")["body"] == "[1e400]"
    assert event("application/json", b'{"a": 1.5}')["body"] == {"a": 1.5}


@given(st.dictionaries(texts, texts, min_size=1, max_size=5))
def test_a_form_body_is_a_dict(fields: dict[str, str]) -> None:
    raw = urlencode(fields).encode()
    assert event("application/x-www-form-urlencoded", raw)["body"] == fields


def test_a_form_body_without_equals_stays_text() -> None:
    # curl -d '{"name": "Luke"}' sends this content type: Pipedream shows the string.
    built = event("application/x-www-form-urlencoded", b'{"name": "Luke"}')
    assert built["body"] == '{"name": "Luke"}'


def test_text_other_types_and_charsets() -> None:
    assert event("text/plain", b"hi")["body"] == "hi"
    assert event(None, b"hi")["body"] == "hi"
    assert event("application/octet-stream", b"\xff")["body"] == "\ufffd"
    assert event("text/plain; charset=latin-1", "é".encode("latin-1"))["body"] == "é"
    assert event("text/plain; charset=nonsense", "é".encode())["body"] == "é"


def test_an_empty_body_has_no_body_field() -> None:
    built = event("application/json", b"", method="get", query="a=1&a=2&b=")
    assert built == {
        "method": "GET",
        "path": "/",
        "query": {"a": "2", "b": ""},
        "headers": {"content-type": "application/json"},
        "bodyRaw": "",
    }


def test_headers_lowercased_and_repeats_joined() -> None:
    built = h.build_event("GET", "", "", [("X-A", "1"), ("x-a", "2"), ("Host", "example.com")], b"")
    assert built["headers"] == {"x-a": "1, 2", "host": "example.com"}
    assert built["path"] == "/"


@given(st.lists(st.tuples(st.text(min_size=1), texts), max_size=6))
def test_header_names_are_always_lowercase(pairs: list[tuple[str, str]]) -> None:
    built = h.build_event("GET", "/", "", pairs, b"")
    assert all(name == name.lower() for name in built["headers"])


def test_multipart_fields_and_files() -> None:
    boundary = "XyZ"
    raw = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="title"\r\n\r\n'
        "hello\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="doc"; filename="a.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
        "file body\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    body = event(f"multipart/form-data; boundary={boundary}", raw)["body"]
    assert body == {
        "title": "hello",
        "doc": {
            "filename": "a.txt",
            "mimetype": "text/plain",
            "size": 9,
            "base64": base64.b64encode(b"file body").decode(),
        },
    }
    assert event("multipart/form-data", b"not multipart")["body"] == "not multipart"


def test_nul_characters_are_replaced_everywhere() -> None:
    built = event("application/json", b'{"a\\u0000": ["x\\u0000"]}')
    assert built["body"] == {"a\ufffd": ["x\ufffd"]}
    assert "\x00" not in built["bodyRaw"]


CONTENT_TYPES = [
    None,
    "application/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=b",
    "text/plain; charset=utf-16",
]


@given(
    st.binary(max_size=64) | st.lists(st.text(), max_size=3).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(CONTENT_TYPES),
    st.text(max_size=12),
    st.text(max_size=12),
)
def test_no_event_ever_holds_a_nul(raw: bytes, content_type: str | None, path: str, q: str) -> None:
    headers = [("content-type", content_type)] if content_type else []
    built = h.build_event("POST", path, urlencode({"q": q}), headers, raw)
    assert not _strings_with_nul(built)  # PostgreSQL's JSONB refuses them


def _strings_with_nul(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if "\x00" in value else []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings_with_nul(k) + _strings_with_nul(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_with_nul(v)]
    return []


def test_declared_length_and_custom_response() -> None:
    assert h.declared_length([("Content-Length", " 12 ")]) == 12
    assert h.declared_length([("content-length", "x")]) is None
    assert h.declared_length([]) is None
    http = {"name": "http", "type": "$.interface.http"}
    assert not h.custom_response([http])
    assert h.custom_response(
        [{"name": "db", "type": "$.service.db"}, {**http, "customResponse": True}]
    )


# ---- the token bucket -----------------------------------------------------------------------


@given(
    st.floats(0.5, 50),
    st.integers(1, 20),
    st.lists(st.integers(0, 2000), min_size=1, max_size=60),
)
def test_the_bucket_never_allows_more_than_burst_plus_rate(
    rate: float, burst: int, gaps: list[int]
) -> None:
    bucket = None
    now = 1_000_000
    start = now
    allowed = 0
    for gap in gaps:
        now += gap
        bucket, wait = h.take(bucket, now, rate=rate, burst=burst)
        if wait == 0:
            allowed += 1
        else:
            # Waiting that long is enough for the next request to pass.
            assert h.take(bucket, now + wait, rate=rate, burst=burst)[1] == 0
    assert allowed <= burst + (now - start) * rate / 1000 + 1e-9


def test_the_bucket_allows_a_burst_then_refills() -> None:
    bucket = None
    for _ in range(3):
        bucket, wait = h.take(bucket, 0, rate=10, burst=3)
        assert wait == 0
    bucket, wait = h.take(bucket, 0, rate=10, burst=3)
    assert wait == 100  # one token every 100 ms
    assert not h.is_full(bucket, 100, rate=10, burst=3)
    assert h.is_full(bucket, 300, rate=10, burst=3)
    assert h.take(bucket, 100, rate=10, burst=3)[1] == 0
    assert h.take(None, 0, rate=0, burst=3)[1] == 0  # no limit


# ---- the stored request (an http job's payload) ------------------------------------------------

header_names = st.sampled_from(["Content-Type", "X-A", "x-a", "Content-Length", "Accept"])
header_values = st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=20)
content_types = st.sampled_from(
    ["application/json", "text/plain; charset=latin-1", "application/x-www-form-urlencoded", ""]
)


@given(
    method=st.sampled_from(["GET", "POST", "put"]),
    path=st.text(st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=12),
    query=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    headers=st.lists(st.tuples(header_names, header_values), max_size=4),
    content_type=content_types,
    body=st.binary(max_size=40)
    | texts.map(lambda t: t.encode())
    | json_values.map(lambda v: json.dumps(v).encode()),
)
# Found by hypothesis: the text "\u0000" (a backslash, then "u0000") is no NUL.
@example("GET", "", "", [], "application/json", b"\\u0000")
def test_the_stored_request_becomes_the_same_event(
    method: str,
    path: str,
    query: str,
    headers: list[tuple[str, str]],
    content_type: str,
    body: bytes,
) -> None:
    """What the job stores, through JSON (the jobs table), gives the event the request would
    have given at once; and the stored JSON never holds a NUL (PostgreSQL's JSONB)."""
    headers = [*headers, ("Content-Type", content_type)] if content_type else headers
    stored = json.dumps(h.raw_request(method, path, query, headers, body))
    assert not _has_nul(json.loads(stored))  # "\\u0000" may be there: a backslash, then text
    assert h.event_of(json.loads(stored)) == h.build_event(method, path, query, headers, body)


def _has_nul(value: object) -> bool:
    """A NUL anywhere in a JSON value's strings or keys (JSONB refuses ``\\u0000``)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def test_the_stored_request_keeps_bytes_that_are_not_utf8() -> None:
    payload = h.raw_request(
        "POST", "/", "", [("Content-Type", "application/octet-stream")], b"\xff\x00"
    )
    assert payload[h.RAW_KEY]["body64"] == base64.b64encode(b"\xff\x00").decode()
    assert h.event_of(payload)["bodyRaw"] == "\ufffd\ufffd"  # NUL → U+FFFD, as at once
    # An event stored before this format (or built at once) is the event itself.
    event = h.build_event("GET", "/", "a=1", [], b"")
    assert h.event_of(event) is event
