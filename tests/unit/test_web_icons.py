"""App icons for the builder's pickers: local images only, else a monogram (web/icons.py);
components grouped by app with the catalog's names (web/pickers.py)."""

from __future__ import annotations

import base64
import doctest

from sluice.domain import apps
from sluice.domain.components import SavedComponent
from sluice.web import icons, pickers


def test_doctests() -> None:
    assert doctest.testmod(icons).failed == 0


def _svg(src: str) -> str:
    return base64.b64decode(src.removeprefix("data:image/svg+xml;base64,")).decode()


def test_a_remote_image_is_never_used_a_local_one_is() -> None:
    for remote in ("https://cdn.example/a.png", "//cdn.example/a.png", "javascript:x", "x.png"):
        assert icons.icon_src("a", "A", remote).startswith("data:image/svg+xml;base64,")
    assert icons.icon_src("a", "A", "/assets/a.png") == "/assets/a.png"
    assert icons.icon_src("a", "A", "data:image/png;base64,AAAA") == "data:image/png;base64,AAAA"


def test_the_monogram_is_letters_only_and_stable_per_app() -> None:
    svg = _svg(icons.monogram("evil", '<script>"x"</script> & co'))
    assert "<script>" not in svg and '"x"' not in svg and "SX" in svg
    assert icons.monogram("slack", "Slack") == icons.monogram("slack", "Slack")
    assert icons.monogram("slack", "Slack") != icons.monogram("slacker", "Slack")


def _component(key: str | None, name: str, app_prop: str | None = None) -> SavedComponent:
    configurable = [{"name": "a", "type": "app", "app": app_prop}] if app_prop else []
    return SavedComponent(
        id=f"sc_{name}", owner_id="u", key=key, name=name, version="0.1.0",
        component_type="action", description=None, entry_path="a.mjs", files={"a.mjs": ""},
        code_hash="", dependencies={}, component_url=None, shape={},
        configurable_props=configurable, registry=key is not None, created_at=0, updated_at=0,
    )  # fmt: skip


def test_components_are_grouped_by_app_with_the_catalogs_names() -> None:
    found = [
        _component("http-custom-request", "Custom Request"),
        _component(None, "Mine"),
        _component(None, "Poster", app_prop="slack"),
        _component("formatting-parse-json", "Parse JSON"),
        _component("formatting-transform-case", "Case"),
    ]
    groups = pickers.by_app(found, {a.name_slug: a for a in apps.BUILTIN})
    assert [(g.slug, g.name) for g in groups] == [
        ("formatting", "Formatting"),
        ("http", "HTTP / Webhook"),
        ("slack", "slack" if "slack" not in apps.BUILTIN_BY_SLUG else "Slack"),
        ("", pickers.YOURS),
    ]
    assert [c.name for c in groups[0].components] == ["Case", "Parse JSON"]
    assert all(g.icon.startswith("data:image/svg+xml;base64,") for g in groups)
