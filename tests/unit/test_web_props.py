"""The deploy form both ways: configurable props as fields, a posted form as configured_props."""

from __future__ import annotations

from starlette.datastructures import FormData

from sluice.web import props

DEFINITIONS = [
    {"name": "http", "type": "$.interface.http"},
    {"name": "db", "type": "$.service.db"},
    {"name": "label", "type": "string"},
    {"name": "token", "type": "string", "secret": True},
    {"name": "count", "type": "integer", "min": 1, "optional": True, "default": 2},
    {"name": "loud", "type": "boolean", "optional": True},
    {"name": "tags", "type": "string[]", "optional": True},
    {"name": "ids", "type": "integer[]", "optional": True},
    {"name": "color", "type": "string", "options": [{"label": "Red", "value": "r"}, "g"]},
    {"name": "level", "type": "integer", "options": [1, 2]},
    {"name": "channel", "type": "string", "remoteOptions": True},
    {"name": "extra", "type": "object", "optional": True},
    {"name": "slack", "type": "app", "app": "slack"},
    {"name": "timer", "type": "$.interface.timer", "default": {"intervalSeconds": 60}},
]


def test_fields_skip_what_the_platform_provides_and_never_show_a_secret() -> None:
    fields = props.fields(DEFINITIONS, {"token": "s3cr3t", "tags": ["a", "b"], "level": 2})
    by_name = {f.name: f for f in fields}
    assert "http" not in by_name and "db" not in by_name
    assert by_name["token"].widget == "password" and by_name["token"].value is None
    assert by_name["tags"].value == "a\nb"
    assert by_name["count"].value == 2 and not by_name["count"].required
    assert by_name["color"].options == [('"r"', "Red"), ('"g"', "g")]
    assert by_name["level"].value == "2"
    assert by_name["channel"].widget == "async"
    assert by_name["timer"].value == {"intervalSeconds": 60}


def test_a_posted_form_becomes_typed_configured_props() -> None:
    form = FormData(
        [
            ("prop.label", "hello"),
            ("prop.token", ""),
            ("prop.count", "5"),
            ("prop.loud.present", "1"),
            ("prop.tags", "a\n\n b \n"),
            ("prop.ids", "1\n2"),
            ("prop.color", '"r"'),
            ("prop.level", "2"),
            ("prop.channel", '"C1"'),
            ("prop.extra", '{"k": [1]}'),
            ("prop.slack", "apn_1"),
            ("prop.timer.interval", ""),
            ("prop.timer.cron", "0 * * * *"),
            ("prop.timer.timezone", "Europe/Paris"),
        ]
    )
    assert props.from_form(DEFINITIONS, form) == {
        "label": "hello",
        "count": 5,
        "loud": False,
        "tags": ["a", "b"],
        "ids": [1, 2],
        "color": "r",
        "level": 2,
        "channel": "C1",
        "extra": {"k": [1]},
        "slack": {"authProvisionId": "apn_1"},
        "timer": {"cron": "0 * * * *", "timezone": "Europe/Paris"},
    }


def test_bad_values_are_passed_on_for_the_platform_to_name() -> None:
    form = FormData(
        [("prop.count", "many"), ("prop.extra", "{not json"), ("prop.timer.interval", "9")]
    )
    assert props.from_form(DEFINITIONS, form) == {
        "count": "many",
        "extra": "{not json",
        "timer": {"intervalSeconds": 9},
    }


def test_an_app_that_takes_no_account_is_not_required() -> None:
    definitions = [
        {"name": "rss", "type": "app", "app": "rss"},
        {"name": "slack", "type": "app", "app": "slack"},
    ]
    by_name = {f.name: f for f in props.fields(definitions, {})}
    assert by_name["rss"].required is False and by_name["slack"].required is True
