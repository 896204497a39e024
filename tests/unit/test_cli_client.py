"""The CLI's SSE reader: fields, comments, multi-line data, ids."""

from __future__ import annotations

from sluice.cli import client


def test_messages_follow_the_sse_format() -> None:
    lines = [
        ": keepalive",
        "id: 1700000000123-0",
        'data: {"k":"emit",',
        'data: "e":{"n":1}}',
        "",
        "",
        "event: other",
        "data:plain text",
        "",
        "id: 7",
        "",  # an id alone is no message
    ]
    assert list(client._messages(iter(lines))) == [
        client.Message("1700000000123-0", {"k": "emit", "e": {"n": 1}}),
        client.Message(None, "plain text"),
    ]


def test_segment_keeps_a_name_in_one_path_segment() -> None:
    assert client.segment("a/b c") == "a%2Fb%20c"
