"""npm packages a component uses, found by scanning its source (no manifest needed).

Pipedream components import npm packages without a ``package.json`` and may pin a version in
the specifier itself: ``require("axios@0.19.2")``, ``import _ from "lodash@^4"``,
``import x from "@scope/name@1.2.3/sub/path.js"``. Node cannot resolve such specifiers, so a
deploy turns the source into a :class:`DependencyPlan`: the ``dependencies`` to install and the
sources with every pinned specifier rewritten in place to a name Node can resolve.

Here: finding the imports (on ``tokens``' lexing) and planning the install. What a specifier
names is ``specifiers``'; its public names are re-exported here for callers. Everything is pure
(no I/O); ``sluice.runtime.deps`` does the installing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sluice.domain import specifiers, tokens
from sluice.domain.specifiers import NODE_BUILTIN_MODULES, PackageSpec, parse_specifier
from sluice.errors import InvalidComponent

__all__ = [
    "NODE_BUILTIN_MODULES",
    "DependencyPlan",
    "ImportKind",
    "ImportRef",
    "PackageSpec",
    "dependencies_key",
    "find_imports",
    "parse_specifier",
    "plan_dependencies",
]

ImportKind = Literal["import", "require", "dynamic"]

SCANNED_EXTENSIONS = (".mjs", ".cjs", ".js", ".ts", ".mts", ".cts")


@dataclass(frozen=True, slots=True)
class ImportRef:
    """One module specifier in a source; ``source[start:end] == specifier``."""

    specifier: str
    start: int
    end: int
    kind: ImportKind


@dataclass(frozen=True)
class DependencyPlan:
    """What to install for a component, and its sources rewritten to match."""

    dependencies: dict[str, str]
    files: dict[str, str]
    key: str


# --------------------------------------------------------------------------------------------
# Finding imports.

_MEMBER_ACCESS = frozenset({".", "?.", "#"})


def _is_punct(tok: tokens.Token | None, *texts: str) -> bool:
    return tok is not None and tok.kind == "punct" and tok.text in texts


def _clause_source(toks: list[tokens.Token], i: int) -> tokens.Token | None:
    """The string after `from` that ends an import/export clause starting at ``toks[i]``.

    The clause may hold names, `*`, `,` and braces (with quoted names inside braces); anything
    else means this `import`/`export` has no `from "..."`.
    """
    depth = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok.kind == "name":
            if tok.text == "from" and depth == 0 and i + 1 < n and toks[i + 1].kind == "str":
                return toks[i + 1]
        elif tok.kind == "punct" and tok.text in ("*", ","):
            pass
        elif tok.kind == "punct" and tok.text == "{":
            depth += 1
        elif tok.kind == "punct" and tok.text == "}":
            depth -= 1
            if depth < 0:
                return None
        elif not (tok.kind == "str" and depth > 0):
            return None
        i += 1
    return None


def find_imports(source: str) -> list[ImportRef]:
    """Every module specifier written as a literal in ``source``, in source order.

    Covers ``import ... from "x"``, ``import "x"``, ``export ... from "x"``, ``import("x")`` and
    ``require("x")``. Comments, strings, templates and regex literals are skipped. Literals
    containing a backslash are ignored: their text is not their value, and real specifiers
    never need escapes.

    Remembered for the last files scanned: a package's components share their common files
    and app file, and a registry import lays each component out with them (the scan of one
    package's files was 6.5 of 17 s of CPU importing ``@pipedream/slack``).
    """
    return list(_scanned(source))


@functools.lru_cache(maxsize=256)
def _scanned(source: str) -> tuple[ImportRef, ...]:
    toks = tokens.tokenize(source)
    found: dict[int, ImportRef] = {}

    def add(lit: tokens.Token | None, kind: ImportKind) -> None:
        if lit is None or lit.kind not in ("str", "tpl") or "\\" in lit.text:
            return
        found.setdefault(lit.start, ImportRef(lit.text, lit.start + 1, lit.end - 1, kind))

    def at(j: int) -> tokens.Token | None:
        return toks[j] if 0 <= j < len(toks) else None

    for i, tok in enumerate(toks):
        if tok.kind != "name" or tok.text not in ("import", "export", "require"):
            continue
        prev = at(i - 1)
        if _is_punct(prev, *_MEMBER_ACCESS):
            continue  # obj.require(...), obj.import, this.#export
        nxt = at(i + 1)
        if tok.text == "require":
            if _is_punct(nxt, "(") and _is_punct(at(i + 3), ")"):
                add(at(i + 2), "require")
        elif _is_punct(nxt, "("):  # import("x") or import("x", { with: ... })
            if tok.text == "import" and _is_punct(at(i + 3), ")", ","):
                add(at(i + 2), "dynamic")
        elif nxt is not None and nxt.kind == "str":
            if tok.text == "import":  # import "side-effect";
                add(nxt, "import")
        elif not _is_punct(nxt, ".") and not (nxt is not None and nxt.text == "default"):
            # import/export <clause> from "x"; not import.meta, not export default
            add(_clause_source(toks, i + 1), "import")
    return tuple(found[k] for k in sorted(found))


# --------------------------------------------------------------------------------------------
# Plans.

_DECLARED_SECTIONS = ("dependencies", "peerDependencies", "optionalDependencies")


def dependencies_key(dependencies: Mapping[str, str]) -> str:
    """Content address of a dependency set: sha256 of its canonical JSON."""
    canonical = json.dumps(
        dict(dependencies), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _alias_name(name: str, rng: str) -> str:
    flat = name[1:].replace("/", "__") if name.startswith("@") else name
    digest = hashlib.sha256(f"{name}@{rng}".encode()).hexdigest()[:8]
    alias = f"{flat[:200]}__{digest}"
    # npm refuses names starting with ".", "_" or "-" (possible for a flattened scope: @_x/y).
    return alias if alias[0] not in "._-" else f"sluice-{alias}"


def _declared_ranges(package_json: Mapping[str, Any] | None) -> dict[str, str]:
    declared: dict[str, str] = {}
    if not package_json:
        return declared
    # Reversed so that `dependencies` wins over peer and optional ones.
    for section in reversed(_DECLARED_SECTIONS):
        entries = package_json.get(section)
        if isinstance(entries, Mapping):
            for name, value in entries.items():
                declared[str(name)] = value
    return declared


def _declared_range(declared: Mapping[str, Any], name: str) -> str | None:
    if name not in declared:
        return None
    value = declared[name]
    if not isinstance(value, str) or not specifiers.is_registry_range(value):
        raise InvalidComponent(
            f"package.json dependency {name!r}: {value!r} is not a registry version, "
            "semver range or dist-tag (git, file, URL and alias dependencies are not supported)"
        )
    return value.strip() or "*"


@dataclass(frozen=True, slots=True)
class _Use:
    path: str
    ref: ImportRef
    spec: PackageSpec
    range: str


@dataclass(frozen=True, slots=True)
class _Installs:
    """The ``dependencies`` to install, and the ``node_modules`` name each (package, range)
    ends up under."""

    dependencies: dict[str, str]
    names: dict[tuple[str, str], str]


def plan_dependencies(
    files: Mapping[str, str], package_json: Mapping[str, Any] | None = None
) -> DependencyPlan:
    """Scan ``files`` (relative path → source) and plan their npm dependencies.

    A package's range is its pin in the specifier, else its range in ``package_json``, else
    "latest". When one package is used with several ranges, the unpinned range (or the first
    one met, in path order) keeps the package's own name; every other range is installed under
    an npm alias (``"<alias>": "npm:<name>@<range>"``) and its specifiers are rewritten to the
    alias. Pinned specifiers lose their ``@range`` so Node can resolve them.
    """
    uses = _uses(files, _declared_ranges(package_json))
    installs = _installs(uses)
    dependencies = installs.dependencies
    return DependencyPlan(
        dependencies=dependencies,
        files=_rewritten(files, uses, installs.names),
        key=dependencies_key(dependencies),
    )


def _uses(files: Mapping[str, str], declared: Mapping[str, Any]) -> list[_Use]:
    """Every package specifier in the scanned files, path by path, with its range."""
    uses: list[_Use] = []
    for path in sorted(files):
        if not path.endswith(SCANNED_EXTENSIONS):
            continue
        for ref in find_imports(files[path]):
            spec = parse_specifier(ref.specifier)
            if spec is None:
                continue
            rng = spec.range or _declared_range(declared, spec.name) or "latest"
            uses.append(_Use(path, ref, spec, rng))
    return uses


def _installs(uses: list[_Use]) -> _Installs:
    """What to install: each package under its own name at its primary range (the unpinned
    one, else the first met), every other range under an alias."""
    dependencies: dict[str, str] = {}
    install_name: dict[tuple[str, str], str] = {}  # (package, range) -> node_modules name
    by_package: dict[str, list[_Use]] = {}
    for use in uses:
        by_package.setdefault(use.spec.name, []).append(use)
    for name, package_uses in by_package.items():
        unpinned = [u for u in package_uses if u.spec.range is None]
        if unpinned:
            primary: str | None = unpinned[0].range
        elif name in NODE_BUILTIN_MODULES:
            # A pinned `events@3` rewritten to "events" would load Node's built-in instead.
            primary = None
        else:
            primary = package_uses[0].range
        if primary is not None:
            dependencies[name] = primary
            install_name[(name, primary)] = name
        for use in package_uses:
            key = (name, use.range)
            if key not in install_name:
                alias = _alias_name(name, use.range)
                dependencies[alias] = f"npm:{name}@{use.range}"
                install_name[key] = alias
    return _Installs(dependencies, install_name)


def _rewritten(
    files: Mapping[str, str], uses: list[_Use], install_name: Mapping[tuple[str, str], str]
) -> dict[str, str]:
    """``files`` with each specifier replaced by the name its package is installed under."""
    rewritten = dict(files)
    edits: dict[str, list[tuple[ImportRef, str]]] = {}
    for use in uses:
        target = install_name[(use.spec.name, use.range)] + (use.spec.subpath or "")
        if target != use.ref.specifier:
            edits.setdefault(use.path, []).append((use.ref, target))
    for path, path_edits in edits.items():
        source = files[path]
        pieces: list[str] = []
        pos = 0
        for ref, target in path_edits:  # already in source order
            pieces.append(source[pos : ref.start])
            pieces.append(target)
            pos = ref.end
        pieces.append(source[pos:])
        rewritten[path] = "".join(pieces)
    return rewritten
