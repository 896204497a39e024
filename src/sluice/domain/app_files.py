"""What a published package's app file (``<app>.app.mjs``) tells of its app, for the catalog.

An app file is ``export default {type: "app", app: "<slug>", propDefinitions, methods}``: it
names the app's slug, and its methods read the connected account as ``this.$auth.<field>``.
It says nothing of the app's display name, its OAuth endpoints or the fields a user types, so
an imported app is described from what can be read (pure functions over the text, no Node):

- ``name_slug``: the file's ``app: "<slug>"`` (else the file's name);
- ``name``: from ``package.json``'s ``description``, ``"Pipedream Notion Components"`` →
  ``Notion`` (else the slug, in words);
- ``auth_type``, read over the app file and every module it reaches by relative import (an
  app file is often ``{...commonApp, type: "app", app: "brex"}``, its methods in
  ``common-app.mjs``): ``oauth`` when they read an OAuth field (``oauth_access_token``, …), ``keys``
  when it reads other fields (they become the app's fields, each optional), ``none`` when it
  never mentions ``$auth``, and ``unknown`` when it uses ``$auth`` whole (passes it on).

>>> found = app_file("@pipedream/acme", "1.0.0", {
...     "acme.app.mjs": 'export default { type: "app", app: "acme", methods: {'
...         ' h() { return { key: this.$auth.api_key, at: this.$auth["region"] }; } } };',
...     "package.json": '{"description": "Pipedream Acme CRM Components"}'})
>>> found.name_slug, found.name, found.auth_type, found.fields
('acme', 'Acme CRM', 'keys', ('api_key', 'region'))
>>> app_file("@pipedream/brex", "0.1.1", {
...     "brex.app.mjs": 'import commonApp from "./common-app.mjs";'
...         ' export default { ...commonApp, type: "app", app: "brex" };',
...     "common-app.mjs": 'export default { methods: { h() {'
...         ' return `Bearer ${this.$auth.oauth_access_token}`; } } };'}).auth_type
'oauth'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sluice.domain import packages, registry
from sluice.domain.apps import OAUTH_FIELDS

#: The auth type of an app whose file uses ``$auth`` in a way not read here.
UNKNOWN = "unknown"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_]{0,99}$")
_APP_KEY = re.compile(r"""\bapp\s*:\s*["']([A-Za-z0-9_-]+)["']""")
_DOTTED = re.compile(r"\$auth\??\.([A-Za-z_][A-Za-z0-9_]*)")
_INDEXED = re.compile(r"""\$auth\??\.?\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]""")
_DESTRUCTURED = re.compile(r"\{([^{}]*)\}\s*=\s*(?:this|[A-Za-z_$][\w$]*)\.\$auth\b")
_DESCRIPTION = re.compile(r"^Pipedream (.+?) Components?$")


@dataclass(frozen=True)
class AppFile:
    path: str
    name_slug: str
    name: str
    #: ``oauth``, ``keys``, ``none``, or ``unknown``.
    auth_type: str
    #: The ``$auth`` fields the file reads, in the order first read.
    fields: tuple[str, ...]
    #: ``@pipedream/notion@1.0.6``.
    package: str


def app_file(package: str, version: str, files: dict[str, str]) -> AppFile | None:
    """The app a package's app file describes; None when it has no app file, or its slug is
    not a catalog slug (lowercase letters, digits, ``_``)."""
    path = _app_path(package, files)
    if path is None:
        return None
    text = files[path]
    key = _APP_KEY.search(text)
    slug = key.group(1) if key else path.split(".", 1)[0]
    if not _SLUG.match(slug):
        return None
    # The app object is the app file's default export with what it spreads in: its $auth
    # reads can sit in any module the app file imports (relative imports, inside the package).
    reached = packages.component_files(files, path)
    reached.pop("package.json", None)
    code = "\n".join([text, *(t for p, t in reached.items() if p != path)])
    fields = auth_fields(code)
    return AppFile(
        path=path,
        name_slug=slug,
        name=_name(files.get("package.json"), slug),
        auth_type=auth_type(code, fields),
        fields=fields,
        package=f"{package}@{version}",
    )


def _app_path(package: str, files: dict[str, str]) -> str | None:
    """``<app>.app.mjs`` at the package's top (its own app's first, then any other)."""
    own = package.rsplit("/", 1)[-1]
    top = sorted(p for p in files if "/" not in p and re.search(r"\.app\.(mjs|js|cjs)$", p))
    preferred = [p for p in top if p.split(".", 1)[0] == own]
    found = preferred or top
    return found[0] if found else None


def auth_fields(text: str) -> tuple[str, ...]:
    """The ``$auth`` fields ``text`` reads: ``$auth.x``, ``$auth["x"]``, ``{ x } = this.$auth``.

    >>> auth_fields("const { api_key, domain: d } = this.$auth; this.$auth?.token")
    ('api_key', 'domain', 'token')
    """
    found: list[tuple[int, str]] = []
    for pattern in (_DOTTED, _INDEXED):
        found += [(m.start(), m.group(1)) for m in pattern.finditer(text)]
    for m in _DESTRUCTURED.finditer(text):
        offset = m.start(1)
        for part in m.group(1).split(","):
            name = part.split(":", 1)[0].split("=", 1)[0].strip()
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                found.append((offset, name))
            offset += len(part) + 1
    ordered: list[str] = []
    for _, name in sorted(found):
        if name not in ordered:
            ordered.append(name)
    return tuple(ordered)


def auth_type(text: str, fields: tuple[str, ...]) -> str:
    """``oauth``, ``keys``, ``none`` or ``unknown`` (see the module's docstring)."""
    if any(f in OAUTH_FIELDS for f in fields):
        return "oauth"
    if fields:
        return "keys"
    return UNKNOWN if "$auth" in text else "none"


def _name(package_json: str | None, slug: str) -> str:
    try:
        description = json.loads(package_json or "{}").get("description")
    except (ValueError, AttributeError):
        description = None
    if isinstance(description, str):
        m = _DESCRIPTION.match(description.strip())
        if m and m.group(1).strip():
            return m.group(1).strip()[:200]
    return " ".join(word.capitalize() for word in slug.split("_") if word) or slug


def supersedes(package: str, imported_from: str) -> bool:
    """Whether the app of ``package`` (``@pipedream/notion@1.1.0``) replaces the app imported
    before from ``imported_from``: the same package, at a newer version (semver order). An
    app imported from another package, or a version that cannot be read, stays.

    >>> supersedes("@pipedream/acme@1.1.0", "@pipedream/acme@1.0.9")
    True
    >>> supersedes("@pipedream/acme@1.0.0", "@pipedream/acme@1.0.0"), supersedes(
    ...     "@pipedream/acme@2.0.0-beta.1", "@pipedream/acme@1.9.0")
    (False, True)
    >>> supersedes("@pipedream/acme@2.0.0", "@pipedream/acme_crm@1.0.0")
    False
    """
    name, _, version = package.rpartition("@")
    before_name, _, before_version = imported_from.rpartition("@")
    if not name or name != before_name:
        return False
    new, old = registry.parse_semver(version), registry.parse_semver(before_version)
    return new is not None and old is not None and new > old
