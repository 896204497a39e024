"""The runner protocol's JSON lines (``runtime/protocol.py``): orjson's way for the usual
message, the stdlib's for what orjson refuses."""

from __future__ import annotations

import json

import pytest

from sluice.runtime import protocol


def test_a_message_is_one_compact_utf8_line() -> None:
    line = protocol.encode({"type": "run", "id": 1, "event": {"name": "é", "n": [1, 2.5]}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"type": "run", "id": 1, "event": {"name": "é", "n": [1, 2.5]}}
    assert "é".encode() in line  # UTF-8, not an escape


def test_what_orjson_refuses_is_encoded_as_before() -> None:
    # A lone surrogate cannot travel in UTF-8: U+FFFD in its place (text.for_runner).
    assert json.loads(protocol.encode({"id": 1, "v": "a\ud800b"})) == {"id": 1, "v": "a\ufffdb"}
    # Keys that are not strings: as json.dumps writes them.
    assert json.loads(protocol.encode({"id": 1, "v": {1: "x"}})) == {"id": 1, "v": {"1": "x"}}


def test_a_line_from_the_runner_is_decoded_lone_surrogates_included() -> None:
    assert protocol.decode(b'{"id":1,"v":"\\u00e9"}') == {"id": 1, "v": "é"}
    # JSON.stringify writes a lone surrogate as its escape; orjson refuses it, json takes it.
    assert protocol.decode(b'{"id":1,"v":"\\ud800"}') == {"id": 1, "v": "\ud800"}
    with pytest.raises(ValueError):
        protocol.decode(b"not json")
    with pytest.raises(RecursionError):
        protocol.decode(b"[" * 100_000 + b"]" * 100_000)
