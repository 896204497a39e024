from __future__ import annotations

import pytest

from sluice.domain import props
from sluice.errors import InvalidProps

DEFS = [
    {"name": "n", "type": "integer", "min": 1, "max": 5, "optional": True},
    {"name": "s", "type": "string", "secret": True},
    {"name": "b", "type": "boolean[]", "optional": True},
    {"name": "o", "type": "object", "optional": True},
    {
        "name": "c",
        "type": "string",
        "options": [{"label": "A", "value": "a"}, "b"],
        "optional": True,
    },
    {"name": "t", "type": "$.interface.timer", "default": {"intervalSeconds": 60}},
    {"name": "app", "type": "app", "app": "slack"},
    {"name": "http", "type": "$.interface.http"},
]


def test_values_pass_as_given_and_split() -> None:
    out = props.check_configured(
        DEFS,
        {
            "n": "3",
            "s": "secret",
            "b": ["true", False],
            "o": '{"k": 1}',
            "c": "a",
            "app": {"authProvisionId": "apn_1"},
        },
    )
    # As Pipedream passes them: no conversion (run() sees "3" and the JSON text).
    assert out.plain["n"] == "3" and out.plain["b"] == ["true", False]
    assert out.plain["o"] == '{"k": 1}' and out.plain["c"] == "a"
    assert out.plain["t"] == {"intervalSeconds": 60, "cron": None}
    assert out.secret == {"s": "secret"} and "s" not in out.plain
    assert out.apps == {"app": ("apn_1", "slack")}
    assert "http" not in out.plain


@pytest.mark.parametrize(
    ("value", "prop"),
    [
        ({"a": 1}, "s"),  # an object in a string prop (convert-object-to-json-string)
        ("{not json", "o"),  # text in an object prop (export-variables checks it itself)
        (0, "n"),  # below min: Pipedream's UI stops it, its API does not
        (True, "n"),
        ([1], "b"),
        ("z", "c"),  # not one of the options
        ("plain text", "b"),
    ],
)
def test_any_type_is_accepted(value: object, prop: str) -> None:
    base = {"s": "x", "app": {"authProvisionId": "a"}}
    out = props.check_configured(DEFS, {**base, prop: value})
    assert {**out.plain, **out.secret}[prop] == value


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"app": {"authProvisionId": "a"}}, "configured_props.s", "required"),
        ({"s": None, "app": {"authProvisionId": "a"}}, "configured_props.s", "required"),
        ({"s": "x"}, "configured_props.app", "connected slack account"),
        ({"s": "x", "app": "apn_1"}, "configured_props.app", "authProvisionId"),
        (
            {"s": "x", "app": {"authProvisionId": "a"}, "t": {"cron": "* *"}},
            "configured_props.t.cron",
            "five-field",
        ),
        (
            {"s": "x", "app": {"authProvisionId": "a"}, "zz": 1},
            "configured_props.zz",
            "unknown prop",
        ),
    ],
)
def test_refused_only_what_pipedream_refuses(values: dict, field: str, words: str) -> None:
    with pytest.raises(InvalidProps) as info:
        props.check_configured(DEFS, values)
    assert info.value.field == field
    assert words in info.value.message


def test_size_limit() -> None:
    with pytest.raises(InvalidProps, match="over 100 bytes"):
        props.check_configured(
            [{"name": "o", "type": "object"}], {"o": {"k": "x" * 200}}, max_bytes=100
        )


def test_label_value_wrapped_values() -> None:
    out = props.check_configured(DEFS[:1], {"n": {"__lv": {"label": "Three", "value": 3}}})
    assert out.plain["n"] == {"__lv": {"label": "Three", "value": 3}}


@pytest.mark.parametrize("value", [None, {}, {"authProvisionId": None}])
def test_an_app_without_auth_needs_no_account(value: object) -> None:
    defs = [{"name": "app", "type": "app", "app": "rss"}]
    values = {} if value is None else {"app": value}
    with pytest.raises(InvalidProps, match="authProvisionId"):
        props.check_configured(defs, values)
    out = props.check_configured(defs, values, auth_free={"rss"})
    assert out.apps == {} and out.plain == {}
    # An account named all the same is checked as any app's.
    named = props.check_configured(defs, {"app": {"authProvisionId": "apn_1"}}, auth_free={"rss"})
    assert named.apps == {"app": ("apn_1", "rss")}
