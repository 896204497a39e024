"""What a published ``@pipedream/<app>`` npm package holds, as Pipedream's registry lays it out.

::

    <app>.app.mjs                           the app file (not a component)
    package.json                            dependency ranges
    actions/<slug>/<slug>.mjs               an action   (or .js, CommonJS in older packages)
    sources/<slug>/<slug>.mjs               a source
    actions/<slug>/common.mjs, test-event.mjs, sources/common/*.mjs, common/*.mjs ...
                                            modules the components import (not components)

A component is the file named after its directory; every other file under ``actions/`` and
``sources/`` is a module some component imports. Pure functions: the engine fetches the
package and hands its files here.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from sluice.domain import imports
from sluice.errors import InvalidRequest

SCOPE = "@pipedream/"
_EXTENSIONS = (".mjs", ".js", ".cjs")
_APP = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
_RANGE = re.compile(r"^[0-9A-Za-z.^~<>=*|+ -]+$")


@dataclass(frozen=True)
class PackageSpec:
    name: str  #: ``@pipedream/slack``
    app: str  #: ``slack``
    range: str | None  #: ``0.10.3``, ``^0.10``, or None for the latest

    def __str__(self) -> str:
        return f"{self.name}@{self.range}" if self.range else self.name

    @property
    def exact(self) -> bool:
        """A single version (``1.2.3``), which npm may take from its cache without asking."""
        return self.range is not None and re.fullmatch(r"\d+\.\d+\.\d+", self.range) is not None


def parse_spec(spec: str) -> PackageSpec:
    """``@pipedream/slack@0.10.3``, ``@pipedream/slack``, or short ``slack@^0.10``.

    >>> parse_spec("slack@0.10.3")
    PackageSpec(name='@pipedream/slack', app='slack', range='0.10.3')
    """
    text = spec.strip()
    if text.startswith(SCOPE):
        text = text[len(SCOPE) :]
    elif text.startswith("@"):
        raise InvalidRequest(
            f"only @pipedream/<app> packages are imported, not {spec!r}", field="packages"
        )
    app, _, rng = text.partition("@")
    if not _APP.match(app) or (rng and not _RANGE.match(rng)):
        raise InvalidRequest(
            f"{spec!r} is not an npm package spec such as @pipedream/slack@0.10.3",
            field="packages",
        )
    return PackageSpec(SCOPE + app, app, rng or None)


@dataclass(frozen=True)
class Layout:
    #: The components' entry files, in path order.
    components: list[str]
    #: Files that are not components, each with what it is: ``{path: "app file"}``.
    modules: dict[str, str]


def layout(paths: list[str]) -> Layout:
    """Sort a package's JavaScript files into components and the modules they import."""
    components: list[str] = []
    modules: dict[str, str] = {}
    for path in sorted(paths):
        if not path.endswith(_EXTENSIONS):
            continue
        parts = path.split("/")
        stem = posixpath.splitext(parts[-1])[0]
        if len(parts) == 1:
            modules[path] = "app file" if stem.endswith(".app") else "module"
        elif parts[0] not in ("actions", "sources"):
            modules[path] = f"module ({parts[0]}/)"
        elif len(parts) == 3 and parts[1] == "common":
            modules[path] = f"common module ({parts[0]}/common/)"
        elif len(parts) == 3 and stem == parts[1]:
            components.append(path)
        elif stem.startswith("test-event"):
            modules[path] = "sample event"
        else:
            modules[path] = f"module of {'/'.join(parts[:2])}/"
    return Layout(components, modules)


def component_files(files: dict[str, str], entry: str) -> dict[str, str]:
    """The files ``entry`` needs: itself, every file it reaches by relative import, and the
    package's ``package.json`` (its dependency ranges)."""
    needed: dict[str, str] = {}
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in needed or path not in files:
            continue
        needed[path] = files[path]
        for ref in imports.find_imports(files[path]):
            if ref.specifier.startswith("."):
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(path), ref.specifier.split("?")[0])
                )
                todo.append(target)
    if "package.json" in files:
        needed["package.json"] = files["package.json"]
    return needed


# --------------------------------------------------------------------------------------------
# Pipedream's monorepo (a checkout or an archive of github.com/PipedreamHQ/pipedream): each
# ``components/<app>/`` directory with a ``package.json`` is laid out as its npm package is.

#: The files of an app directory an import reads (as ``npm pack``'s, ``runtime/packages.py``).
TREE_SUFFIXES = (".mjs", ".js", ".cjs", ".json")
_APP_DIR = re.compile(r"^(?:.*/)?components/([a-z0-9_][a-z0-9_.-]*)$")


def app_roots(paths: list[str]) -> dict[str, str]:
    """The app directories of a monorepo tree, ``{app: directory}``: each
    ``components/<app>/`` holding a ``package.json`` (at any depth, as in an archive's
    ``pipedream-master/``), or the tree itself when it is one app's directory.

    >>> app_roots(["pd/components/rss/package.json", "pd/components/rss/rss.app.mjs",
    ...            "pd/components/rss/node_modules/x/package.json", "pd/package.json"])
    {'rss': 'pd/components/rss'}
    >>> app_roots(["package.json", "rss.app.mjs", "sources/a/a.mjs"])
    {'rss': ''}
    """
    roots: dict[str, str] = {}
    for path in sorted(paths):
        directory, name = posixpath.split(path)
        if name != "package.json" or "node_modules" in directory.split("/"):
            continue
        m = _APP_DIR.match(directory)
        if m and m.group(1) not in roots:
            roots[m.group(1)] = directory
    if not roots and "package.json" in paths:
        apps = [p[: -len(".app.mjs")] for p in paths if "/" not in p and p.endswith(".app.mjs")]
        if apps:
            roots[apps[0]] = ""
    return roots


def tree_files(files: dict[str, str], root: str) -> dict[str, str]:
    """The files under ``root`` an import reads, by path relative to it (no ``node_modules``,
    no hidden directories, no path that leaves the tree).

    >>> sorted(tree_files({"c/a/a.app.mjs": "", "c/a/.git/x.js": "", "c/a/README.md": "",
    ...                    "c/ab/x.mjs": ""}, "c/a"))
    ['a.app.mjs']
    """
    prefix = f"{root}/" if root else ""
    out: dict[str, str] = {}
    for path, text in files.items():
        if not path.startswith(prefix) or not path.endswith(TREE_SUFFIXES):
            continue
        rel = path[len(prefix) :]
        parts = rel.split("/")
        # No node_modules, no hidden directories, and nothing that leaves the tree ("..", "").
        if "node_modules" in parts or any(not p or p.startswith(".") for p in parts):
            continue
        out[rel] = text
    return out
