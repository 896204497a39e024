"""Rules of the public component registry (the spec's component table, "key" and "version").

A registry component needs a semantic ``version`` and a ``key`` of the form
``<app_name_slug>-<slugified-component-name>`` (``http-new-requests``, ``google_drive-new-file``):
the app slug may hold underscores, the rest is kebab-case. When the component has app props,
the app slug must be one of theirs. Each published version must be newer than the last.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from sluice.errors import Conflict, InvalidComponent

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_APP_SLUG = re.compile(r"^[a-z0-9_]+$")


def slugify_name(name: str) -> str:
    """``"New Requests!"`` → ``"new-requests"``."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def parse_semver(version: str) -> tuple[int, int, int, tuple[Any, ...]] | None:
    m = _SEMVER.match(version)
    if m is None:
        return None
    pre = m.group(4)
    # Precedence: a release sorts after its prereleases; prerelease fields compare
    # numerically when numeric, else as text, numbers before text (semver §11).
    pre_key: tuple[Any, ...] = (
        (1,)
        if pre is None
        else (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    )
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key


def check(
    key: str | None,
    version: str,
    name: str,
    app_slugs: list[str],
    *,
    warnings: list[str] | None = None,
) -> str:
    """Validate a component for the registry; returns its key.

    With ``warnings`` (the compatibility rules) a key that does not follow
    ``<app_name_slug>-<slugified-component-name>`` is accepted and a warning says so: 105 of
    the 430 components of 16 popular ``@pipedream/*`` packages have such keys
    (``notion-new-database``). A key and a semantic version stay required.
    """
    if parse_semver(version) is None:
        raise InvalidComponent(
            f"registry components need a semantic version such as 0.0.1, not {version!r}",
            field="version",
        )
    expected_tail = slugify_name(name)
    example = f"{app_slugs[0] if app_slugs else '<app>'}-{expected_tail}"
    if not key:
        raise InvalidComponent(f"registry components need a key, e.g. {example!r}", field="key")
    prefix, _, tail = key.partition("-")
    problem = None
    if not tail or not _APP_SLUG.match(prefix) or tail != expected_tail:
        problem = (
            f"a registry key is <app_name_slug>-<slugified-component-name>: {example!r} for "
            f"the name {name!r}, not {key!r}"
        )
    elif app_slugs and prefix not in app_slugs:
        problem = (
            f"the key must start with the component's app ({', '.join(app_slugs)}), not {prefix!r}"
        )
    if problem is not None:
        if warnings is None:
            raise InvalidComponent(problem, field="key")
        warnings.append(f"key: {problem} (compatibility rules)")
    return key


def check_newer(key: str, version: str, published: list[str]) -> None:
    """A new version must be newer than every published one of that key."""
    new = parse_semver(version)
    assert new is not None
    for old in published:
        parsed = parse_semver(old)
        if parsed is not None and parsed >= new:
            raise Conflict(
                f"{key} {old} is already in the registry; publish a version newer than {old}",
                field="version",
            )


def ordered(versions: list[str]) -> list[str]:
    """Semantic versions oldest first (non-semver ones, which the registry refuses, dropped)."""
    parsed = [(p, v) for v in versions if (p := parse_semver(v)) is not None]
    return [v for _, v in sorted(parsed)]


def latest(versions: list[str]) -> str | None:
    parsed = [(parse_semver(v), v) for v in versions]
    valid = [(p, v) for p, v in parsed if p is not None]
    return max(valid)[1] if valid else None
