"""Registry import rules: package specs, a package's layout, and the compatibility rules."""

from __future__ import annotations

import pytest

from sluice.config import Settings
from sluice.domain import components, packages, registry
from sluice.errors import InvalidComponent, InvalidRequest


@pytest.mark.parametrize(
    ("spec", "name", "rng", "exact"),
    [
        ("@pipedream/slack@0.10.3", "@pipedream/slack", "0.10.3", True),
        ("@pipedream/notion", "@pipedream/notion", None, False),
        ("google_drive@^1.4", "@pipedream/google_drive", "^1.4", False),
    ],
)
def test_specs(spec: str, name: str, rng: str | None, exact: bool) -> None:
    parsed = packages.parse_spec(spec)
    assert (parsed.name, parsed.range, parsed.exact) == (name, rng, exact)
    assert str(parsed) == (f"{name}@{rng}" if rng else name)


@pytest.mark.parametrize("spec", ["@evil/slack", "slack@1.0; rm -rf", "../x", ""])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(InvalidRequest):
        packages.parse_spec(spec)


def test_layout_tells_components_from_modules() -> None:
    found = packages.layout(
        [
            "slack.app.mjs",
            "package.json",
            "common/constants.mjs",
            "actions/send/send.mjs",
            "actions/send/common.mjs",
            "actions/common/send-message.mjs",
            "sources/new-message/new-message.mjs",
            "sources/new-message/test-event.mjs",
            "sources/legacy/legacy.js",
            "sources/common/base.mjs",
            "README.md",
        ]
    )
    assert found.components == [
        "actions/send/send.mjs",
        "sources/legacy/legacy.js",
        "sources/new-message/new-message.mjs",
    ]
    assert found.modules == {
        "actions/common/send-message.mjs": "common module (actions/common/)",
        "actions/send/common.mjs": "module of actions/send/",
        "common/constants.mjs": "module (common/)",
        "slack.app.mjs": "app file",
        "sources/common/base.mjs": "common module (sources/common/)",
        "sources/new-message/test-event.mjs": "sample event",
    }


def test_component_files_follow_relative_imports() -> None:
    files = {
        "a.app.mjs": 'import c from "./common/c.mjs"; export default {};',
        "common/c.mjs": "export default 1;",
        "common/unused.mjs": "export default 2;",
        "actions/x/x.mjs": 'import a from "../../a.app.mjs"; import t from "./t.mjs"; '
        'import axios from "axios";',
        "actions/x/t.mjs": "export default {};",
        "package.json": "{}",
    }
    assert sorted(packages.component_files(files, "actions/x/x.mjs")) == [
        "a.app.mjs",
        "actions/x/t.mjs",
        "actions/x/x.mjs",
        "common/c.mjs",
        "package.json",
    ]


def test_registry_keys_are_waived_with_a_warning_under_compatibility_rules() -> None:
    with pytest.raises(InvalidComponent):
        registry.check("notion-new-database", "0.0.1", "New Data Source Created", ["notion"])
    warnings: list[str] = []
    key = registry.check(
        "notion-new-database", "0.0.1", "New Data Source Created", ["notion"], warnings=warnings
    )
    assert key == "notion-new-database"
    assert warnings and "notion-new-data-source-created" in warnings[0]
    # A key and a semantic version stay required.
    with pytest.raises(InvalidComponent):
        registry.check(None, "0.0.1", "X", [], warnings=[])
    with pytest.raises(InvalidComponent):
        registry.check("a-x", "one", "X", [], warnings=[])


INFO = {
    "name": "Feed",
    "version": "0.0.1",
    "type": "action",
    "run_type": "function",
    "props": [
        {"name": "db", "definition": {"type": "$.service.db"}, "shorthand": True},
        {"name": "n", "definition": {"type": "integer", "default": 3}},
    ],
}


def test_compatibility_rules_waive_what_pipedream_breaks() -> None:
    with pytest.raises(InvalidComponent):
        components.validate_shape(INFO)
    shape = components.validate_shape(INFO, compat=True)
    assert [p["name"] for p in shape.configurable_props] == ["db", "n"]
    assert shape.configurable_props[1]["optional"] is True
    assert len(shape.warnings) == 2
    assert "$.service.db in an action" in shape.warnings[0]


def test_the_setting_keeps_its_old_name() -> None:
    assert not Settings.from_env({}).compat_rules
    assert Settings.from_env({"SLUICE_COMPONENT_RULES": "pipedream"}).compat_rules
    assert Settings.from_env({"SLUICE_REQUIRED_PROP_DEFAULTS": "accept"}).compat_rules
    with pytest.raises(InvalidRequest):
        Settings.from_env({"SLUICE_COMPONENT_RULES": "loose"})
