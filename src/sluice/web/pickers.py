"""The builder's pickers, as Pipedream's step and trigger pickers: components grouped by app,
each app shown with its name (from the app catalog, else its slug) and its icon
(``web/icons.py``: local images only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.platform import Platform, SavedComponent
from sluice.web import icons

#: The group of the account's components that name no app.
YOURS = "Your components"


@dataclass(frozen=True)
class AppGroup:
    slug: str
    name: str
    icon: str  # an image's src: a path on this server or a data: URI
    components: list[SavedComponent]


def app_of(component: SavedComponent) -> str:
    """A component's app: its key's first part (registry keys are ``<app>-<name>``), else the
    app of its first app prop, else none (``""``)."""
    if component.key and "-" in component.key:
        return component.key.split("-", 1)[0]
    for prop in component.configurable_props:
        if prop.get("type") == "app" and isinstance(prop.get("app"), str):
            return str(prop["app"])
    return ""


def by_app(found: list[SavedComponent], apps: dict[str, Any]) -> list[AppGroup]:
    """``found`` grouped by app, apps by name, the account's app-less ones last;
    ``apps``: the catalog's apps by slug (``platform.catalog.list()``)."""
    groups: dict[str, list[SavedComponent]] = {}
    for c in found:
        groups.setdefault(app_of(c), []).append(c)
    out = []
    for slug, members in groups.items():
        app = apps.get(slug)
        name = app.name if app is not None else (slug or YOURS)
        img = app.img_src if app is not None else None
        members.sort(key=lambda c: c.name.lower())
        out.append(AppGroup(slug, name, icons.icon_src(slug or "you", name, img), members))
    return sorted(out, key=lambda g: (g.slug == "", g.name.lower()))


async def grouped(platform: Platform, found: list[SavedComponent]) -> list[AppGroup]:
    apps = {a.name_slug: a for a in await platform.catalog.list()}
    return by_app(found, apps)


async def choices(platform: Platform, owner_id: str, component_type: str) -> list[SavedComponent]:
    """The components of ``component_type`` a picker offers, one per key: the account's own
    (newest first), then the registry's."""
    mine = await platform.component_page(
        owner_id, limit=100, before=None, after=None, component_type=component_type
    )
    shared = await platform.registry_search("", component_type=component_type)
    seen: set[str] = set()
    out = []
    for c in [*mine.items, *shared]:
        ref = c.key or c.id
        if ref not in seen:
            seen.add(ref)
            out.append(c)
    return out
