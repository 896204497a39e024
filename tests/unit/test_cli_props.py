"""Prop values given on the command line: typed by the prop's definition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.cli import props
from sluice.errors import CliError

DEFS = [
    {"name": "s", "type": "string"},
    {"name": "n", "type": "integer"},
    {"name": "b", "type": "boolean", "optional": True, "default": False},
    {"name": "tags", "type": "string[]"},
    {"name": "o", "type": "object", "optional": True},
    {"name": "slack", "type": "app", "app": "slack"},
    {"name": "timer", "type": "$.interface.timer"},
    {"name": "http", "type": "$.interface.http"},
    {"name": "channel", "type": "$.discord.channel"},
]


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("s=123", "123"),  # a string prop keeps the text
        ('s="quoted"', "quoted"),
        ("s=a=b", "a=b"),
        ("n=5", 5),
        ("b=true", True),
        ('tags=["a","b"]', ["a", "b"]),
        ("tags=a, b", ["a", "b"]),
        ('o={"k": 1}', {"k": 1}),
        ("slack=apn_1", {"authProvisionId": "apn_1"}),
        ('timer={"intervalSeconds": 60}', {"intervalSeconds": 60}),
        ("channel=123", "123"),
        ("unknown=[1]", [1]),
        ("unknown=text", "text"),
    ],
)
def test_prop_values_are_typed_by_their_definition(assignment: str, expected: object) -> None:
    name = assignment.split("=", 1)[0]
    assert props.given([assignment], None, DEFS)[name] == expected


def test_prop_wins_over_props_file(tmp_path: Path) -> None:
    file = tmp_path / "p.json"
    file.write_text(json.dumps({"n": 1, "s": "file", "slack": "apn_f"}))
    values = props.given(["n=2"], file, DEFS)
    assert values == {"n": 2, "s": "file", "slack": {"authProvisionId": "apn_f"}}


def test_a_bad_assignment_says_how_to_write_it() -> None:
    with pytest.raises(CliError, match="NAME=VALUE"):
        props.given(["novalue"], None, DEFS)


def test_missing_lists_required_props_without_value_in_order() -> None:
    names = [p["name"] for p in props.missing(DEFS, {"n": 1})]
    assert names == ["s", "tags", "slack", "channel"]


class Catalog:
    """The API's ``GET /v1/apps/{slug}``, for ``configure``: rss takes no account."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def get(self, path: str, **params: object) -> object:
        self.asked.append(path)
        if path == "/v1/apps/rss":
            return {"data": {"name_slug": "rss", "auth_type": "none"}}
        if path == "/v1/apps/slack":
            return {"data": {"name_slug": "slack", "auth_type": "oauth"}}
        raise CliError("no app", code="not_found", status=404)


def test_an_app_that_takes_no_account_is_not_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    defs = [{"name": "rss", "type": "app", "app": "rss"}, {"name": "url", "type": "string"}]
    api = Catalog()
    assert props.configure(api, {"configurable_props": defs}, {"url": "u"}) == {"url": "u"}
    assert api.asked == ["/v1/apps/rss"]
    for app in ("slack", "unknown"):
        app_defs = [{"name": "a", "type": "app", "app": app}]
        with pytest.raises(CliError, match="missing required props: a"):
            props.configure(Catalog(), {"configurable_props": app_defs}, {})
