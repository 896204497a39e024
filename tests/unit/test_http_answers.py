"""What an HTTP endpoint answers: ``respond()``'s answer or refusal, the default and preflight
answers (Hypothesis against simple models)."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sluice.domain import http_events as h
from sluice.domain.http_events import Answer, Refusal
from sluice.domain.states import Unanswered
from tests.unit.test_http_events import json_values


@given(st.integers(-1000, 1000))
def test_status_coercion_matches_the_range(n: int) -> None:
    expected = n if 100 <= n <= 599 else None
    assert h.coerce_status(n) == expected
    assert h.coerce_status(str(n)) == (expected if n >= 0 else None)
    assert h.coerce_status(float(n)) == expected


def test_statuses_that_are_not_numbers() -> None:
    for value in (True, None, "abc", "", "2_00", 200.5, math.nan, [200], {"s": 200}):
        assert h.coerce_status(value) is None, value
    assert h.coerce_status(" 201 ") == 201


def test_invalid_statuses_are_refused_with_a_reason() -> None:
    refusal = h.answer(99, None, None, None)
    assert isinstance(refusal, Refusal) and refusal.reason == Unanswered.INVALID_STATUS
    assert "99" in refusal.message
    informational = h.answer(101, None, None, None)
    assert isinstance(informational, Refusal) and "1xx" in informational.message


def _headers(answer: Answer | Refusal) -> dict[str, list[str]]:
    assert isinstance(answer, Answer)
    out: dict[str, list[str]] = {}
    for name, value in answer.headers:
        out.setdefault(name, []).append(value)
    return out


@given(json_values.filter(lambda v: v is not None))  # null is "no body" (the runner)
def test_json_bodies(value: Any) -> None:
    result = h.answer(200, {}, value, "json")
    assert isinstance(result, Answer)
    assert json.loads(result.body) == value
    assert _headers(result)["content-type"] == ["application/json; charset=utf-8"]


@given(st.binary())
def test_buffer_bodies(data: bytes) -> None:
    result = h.answer(200, None, base64.b64encode(data).decode(), "base64")
    assert isinstance(result, Answer) and result.body == data
    assert _headers(result)["content-type"] == ["application/octet-stream"]


def test_text_bodies_headers_and_framing() -> None:
    result = h.answer(
        "202",
        {
            "Content-Type": "text/csv",
            "Content-Length": "999",
            "X-N": 3,
            "X-B": True,
            "Set-Cookie": ["a", "b"],
            "X-None": None,
        },
        "a,b",
        "utf8",
    )
    assert isinstance(result, Answer) and result.status == 202 and result.body == b"a,b"
    assert _headers(result) == {
        "content-type": ["text/csv"],
        "x-n": ["3"],
        "x-b": ["true"],
        "set-cookie": ["a", "b"],
        "access-control-allow-origin": ["*"],
        "content-security-policy": [h.SANDBOX],
        "x-content-type-options": ["nosniff"],
    }
    plain = h.answer(200, None, "hi", "utf8")
    assert _headers(plain)["content-type"] == ["text/plain; charset=utf-8"]
    own_cors = h.answer(200, {"Access-Control-Allow-Origin": "https://a.example"}, None, None)
    assert _headers(own_cors)["access-control-allow-origin"] == ["https://a.example"]


def test_an_answer_is_sandboxed() -> None:
    """An endpoint may answer on the web UI's origin: a page one serves must not act as the UI
    (which cookies cross is ``endpoint_origins``', tested in test_endpoint_origins.py)."""
    result = h.answer(
        200,
        {"Content-Type": "text/html", "Content-Security-Policy": "a"},
        "<script>fetch('/v1/users/me')</script>",
        "utf8",
    )
    assert isinstance(result, Answer)
    headers = _headers(result)
    # The source's own policy is kept; the sandbox is added (a browser enforces both).
    assert headers["content-security-policy"] == ["a", h.SANDBOX]
    assert "allow-same-origin" not in h.SANDBOX and "allow-top-navigation" not in h.SANDBOX
    assert headers["x-content-type-options"] == ["nosniff"]


def test_no_content_statuses_carry_no_body() -> None:
    for status in (204, 205, 304):
        result = h.answer(status, None, {"a": 1}, "json")
        assert isinstance(result, Answer) and result.body == b""
        assert "content-type" not in _headers(result)


def test_bad_headers_and_bodies_are_refused() -> None:
    for headers in (["x"], {"bad name": "v"}, {"x": "a\r\nb"}, {"x": {"nested": 1}}):
        refusal = h.answer(200, headers, None, None)
        assert isinstance(refusal, Refusal), headers
        assert refusal.reason == Unanswered.INVALID_RESPONSE, headers
    assert isinstance(h.answer(200, None, "!!", "base64"), Refusal)
    assert isinstance(h.answer(200, None, "x", "utf16"), Refusal)


def test_default_and_preflight_answers() -> None:
    default = h.default_answer()
    assert default.status == 200 and json.loads(default.body) == {"success": True}
    preflight = h.preflight_answer("content-type")
    headers = dict(preflight.headers)
    assert preflight.status == 204
    assert headers["access-control-allow-methods"] == "GET,HEAD,PUT,PATCH,POST,DELETE"
    assert headers["access-control-allow-headers"] == "content-type"
    assert "access-control-allow-headers" not in dict(h.preflight_answer(None).headers)
