"""Routing of emits to subscribers and the rules of a new subscription (domain/routing.py)."""

from __future__ import annotations

import pytest

from sluice import errors
from sluice.domain.routing import Link, check_link, listeners


def test_exact_emitter_and_exact_channel() -> None:
    links = [
        Link("dc_a", "dc_default", ""),
        Link("dc_a", "dc_ch1", "ch1"),
        Link("dc_b", "dc_other", ""),
    ]
    assert listeners(links, "dc_a", "") == ["dc_default"]
    assert listeners(links, "dc_a", "ch1") == ["dc_ch1"]
    assert listeners(links, "dc_a", "ch2") == []
    assert listeners(links, "dc_b", "ch1") == []


def test_glob_hears_every_source_once_and_never_echoes() -> None:
    links = [Link("dc_*", "dc_l", ""), Link("dc_a", "dc_l", ""), Link("dc_*", "dc_m", "x")]
    assert listeners(links, "dc_a", "") == ["dc_l"]  # once, though linked twice
    assert listeners(links, "dc_b", "") == ["dc_l"]
    assert listeners(links, "dc_l", "") == []  # its own emits never come back via the glob
    assert listeners(links, "dc_b", "x") == ["dc_m"]
    assert listeners(links, "p_w", "") == []  # dc_* is sources only


def test_an_explicit_self_link_on_a_named_channel_delivers() -> None:
    assert listeners([Link("dc_a", "dc_a", "self")], "dc_a", "self") == ["dc_a"]


@pytest.mark.parametrize(
    ("emitter", "listener", "name", "field", "words"),
    [
        ("p_abc", "p_abc", "", "listener_id", "its own events"),
        ("p_abc", "p_abc", "$errors", "listener_id", "its own errors"),
        ("dc_a", "sc_abc", "", "listener_id", "saved component"),
        ("wh_abc", "dc_a", "", "emitter_id", "a webhook only listens"),
        ("dc_a", "dc_*", "", "listener_id", "deployed source"),
        ("dc_", "dc_a", "", "emitter_id", "dc_*"),
        ("hello", "dc_a", "", "emitter_id", "deployed source"),
        ("dc_a", "dc_a", "", "listener_id", "its own events"),
        ("dc_a", "dc_a", "$logs", "listener_id", "its own logs"),
        ("dc_a", "dc_b", "x" * 301, "event_name", "300"),
    ],
)
def test_links_refused(emitter: str, listener: str, name: str, field: str, words: str) -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        check_link(emitter, listener, name)
    assert caught.value.field == field
    assert words in caught.value.message


@pytest.mark.parametrize(
    ("emitter", "listener", "name"),
    [
        ("dc_a", "dc_b", ""),
        ("dc_*", "dc_b", ""),
        ("dc_a", "dc_a", "self"),
        ("dc_a", "dc_b", "$in"),
        ("p_a", "p_b", "$errors"),
        ("p_*", "p_b", "$errors"),
        ("p_a", "dc_b", "$errors"),
        ("dc_a", "p_b", ""),
        ("p_a", "p_b", "alerts"),
        ("dc_a", "p_b", "$errors"),
        ("dc_a", "p_b", "$logs"),
        ("p_*", "dc_b", "$logs"),
        ("dc_*", "p_b", "$errors"),
        ("dc_a", "wh_abc", ""),
        ("p_*", "wh_abc", "$errors"),
    ],
)
def test_links_accepted(emitter: str, listener: str, name: str) -> None:
    check_link(emitter, listener, name)
