"""npm packages a component uses, found by scanning its source (no manifest needed).

Pipedream components import npm packages without a ``package.json`` and may pin a version in
the specifier itself: ``require("axios@0.19.2")``, ``import _ from "lodash@^4"``,
``import x from "@scope/name@1.2.3/sub/path.js"``. Node cannot resolve such specifiers, so a
deploy turns the source into a :class:`DependencyPlan`: the ``dependencies`` to install and the
sources with every pinned specifier rewritten in place to a name Node can resolve.

Everything here is pure (no I/O); ``sluice.runtime.deps`` does the installing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

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

# Node 20's `require("module").builtinModules`. Modules that exist only with the `node:` prefix
# (node:test, node:sea, ...) are covered by the prefix rule instead.
# fmt: off
NODE_BUILTIN_MODULES: frozenset[str] = frozenset({
    "_http_agent", "_http_client", "_http_common", "_http_incoming", "_http_outgoing",
    "_http_server", "_stream_duplex", "_stream_passthrough", "_stream_readable",
    "_stream_transform", "_stream_wrap", "_stream_writable", "_tls_common", "_tls_wrap", "assert",
    "assert/strict", "async_hooks", "buffer", "child_process", "cluster", "console", "constants",
    "crypto", "dgram", "diagnostics_channel", "dns", "dns/promises", "domain", "events", "fs",
    "fs/promises", "http", "http2", "https", "inspector", "inspector/promises", "module", "net",
    "os", "path", "path/posix", "path/win32", "perf_hooks", "process", "punycode", "querystring",
    "readline", "readline/promises", "repl", "stream", "stream/consumers", "stream/promises",
    "stream/web", "string_decoder", "sys", "timers", "timers/promises", "tls", "trace_events",
    "tty", "url", "util", "util/types", "v8", "vm", "wasi", "worker_threads", "zlib",
})
# fmt: on

SCANNED_EXTENSIONS = (".mjs", ".cjs", ".js", ".ts", ".mts", ".cts")


@dataclass(frozen=True, slots=True)
class ImportRef:
    """One module specifier in a source; ``source[start:end] == specifier``."""

    specifier: str
    start: int
    end: int
    kind: ImportKind


@dataclass(frozen=True, slots=True)
class PackageSpec:
    """A bare specifier split into package name, pinned range and subpath."""

    name: str
    range: str | None
    subpath: str | None

    @property
    def bare(self) -> str:
        """The specifier without the pinned range, as Node resolves it."""
        return self.name + (self.subpath or "")


@dataclass(frozen=True)
class DependencyPlan:
    """What to install for a component, and its sources rewritten to match."""

    dependencies: dict[str, str]
    files: dict[str, str]
    key: str


# --------------------------------------------------------------------------------------------
# Lexing: just enough of JavaScript to tell code from comments, strings, templates and regexes.

_LINE_TERMINATORS = "\n\r\u2028\u2029"
_WS_RE = re.compile(r"[\s\ufeff]+")
_LINE_COMMENT_RE = re.compile(rf"//[^{_LINE_TERMINATORS}]*")
_HASHBANG_RE = re.compile(rf"#![^{_LINE_TERMINATORS}]*")
_BLOCK_COMMENT_RE = re.compile(r"/\*.*?(?:\*/|\Z)", re.S)
_STRING_RES = {
    q: re.compile(rf"{q}(?:[^{q}\\{_LINE_TERMINATORS}]|\\(?:\r\n|[\s\S]))*{q}") for q in "\"'"
}
# Up to (not including) the next unescaped backtick or `${`.
_TEMPLATE_CHUNK_RE = re.compile(r"(?:[^`\\$]|\\[\s\S]|\$(?!\{))*")
_REGEX_RE = re.compile(
    rf"/(?![*/])(?:[^\\/\[{_LINE_TERMINATORS}]|\\[^{_LINE_TERMINATORS}]"
    rf"|\[(?:[^\]\\{_LINE_TERMINATORS}]|\\[^{_LINE_TERMINATORS}])*\])+/[\w$]*"
)
_NAME_RE = re.compile(r"[A-Za-z_$\u0080-\U0010ffff][\w$\u0080-\U0010ffff]*")
_NUMBER_RE = re.compile(r"\d[\w.]*|\.\d\w*")
_MULTI_PUNCT = ("...", "?.", "++", "--", "=>")

# After these keywords an expression starts, so `/` opens a regex rather than dividing.
_REGEX_AFTER_KEYWORDS = frozenset(
    {
        "return",
        "typeof",
        "instanceof",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "case",
        "do",
        "else",
        "yield",
        "await",
        "extends",
    }
)
_MEMBER_ACCESS = frozenset({".", "?.", "#"})


@dataclass(frozen=True, slots=True)
class _Tok:
    # name | punct | num | str | tpl (template without substitutions) | tpl_end | regex
    # | bad (unterminated literal)
    kind: str
    text: str
    start: int
    end: int


def _regex_allowed(prev: _Tok | None) -> bool:
    """Whether a `/` after ``prev`` starts a regex literal (the usual previous-token heuristic)."""
    if prev is None:
        return True
    if prev.kind == "punct":
        # `}` usually ends a block (regex may follow); `)`/`]`/postfix ++ end an operand.
        return prev.text not in (")", "]", "++", "--")
    if prev.kind == "name":
        return prev.text in _REGEX_AFTER_KEYWORDS
    return False


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    n = len(src)
    i = 0
    if src.startswith("#!"):  # hashbang line
        m = _HASHBANG_RE.match(src, 0)
        i = m.end() if m else n
    # One entry per open template substitution `${`: the `{` depth inside it, so the `}` that
    # closes the substitution (and resumes the template) is told apart from ordinary braces.
    subst_depths: list[int] = []

    def template_from(pos: int, tok_start: int, head: bool) -> int:
        """Scan template text from ``pos``; return where code resumes."""
        m = _TEMPLATE_CHUNK_RE.match(src, pos)
        end = m.end() if m else pos
        if end >= n:
            toks.append(_Tok("bad", src[tok_start:n], tok_start, n))
            return n
        if src[end] == "`":
            if head:
                toks.append(_Tok("tpl", src[pos:end], tok_start, end + 1))
            else:
                toks.append(_Tok("tpl_end", src[pos:end], tok_start, end + 1))
            return end + 1
        # `${`: code follows, as after any opening brace.
        subst_depths.append(0)
        toks.append(_Tok("punct", "${", end, end + 2))
        return end + 2

    while i < n:
        c = src[i]
        if c.isspace() or c == "\ufeff":
            m = _WS_RE.match(src, i)
            i = m.end() if m else i + 1
        elif c == "/" and src.startswith("//", i):
            m = _LINE_COMMENT_RE.match(src, i)
            i = m.end() if m else n
        elif c == "/" and src.startswith("/*", i):
            m = _BLOCK_COMMENT_RE.match(src, i)
            i = m.end() if m else n
        elif c == "/":
            m = _REGEX_RE.match(src, i) if _regex_allowed(toks[-1] if toks else None) else None
            if m:
                toks.append(_Tok("regex", m.group(), i, m.end()))
                i = m.end()
            else:
                toks.append(_Tok("punct", "/", i, i + 1))
                i += 1
        elif c in "\"'":
            m = _STRING_RES[c].match(src, i)
            if m:
                toks.append(_Tok("str", src[i + 1 : m.end() - 1], i, m.end()))
                i = m.end()
            else:
                # Unterminated: skip to the end of the line, it cannot hold a specifier.
                j = i + 1
                while j < n and src[j] not in _LINE_TERMINATORS:
                    j += 2 if src[j] == "\\" else 1
                toks.append(_Tok("bad", src[i:j], i, min(j, n)))
                i = min(j, n)
        elif c == "`":
            i = template_from(i + 1, i, head=True)
        elif c == "}" and subst_depths and subst_depths[-1] == 0:
            subst_depths.pop()
            i = template_from(i + 1, i, head=False)
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = _NUMBER_RE.match(src, i)
            end = m.end() if m else i + 1
            toks.append(_Tok("num", src[i:end], i, end))
            i = end
        elif (m := _NAME_RE.match(src, i)) is not None:
            toks.append(_Tok("name", m.group(), i, m.end()))
            i = m.end()
        else:
            text = next((p for p in _MULTI_PUNCT if src.startswith(p, i)), c)
            if subst_depths and text == "{":
                subst_depths[-1] += 1
            elif subst_depths and text == "}":
                subst_depths[-1] -= 1
            toks.append(_Tok("punct", text, i, i + len(text)))
            i += len(text)
    return toks


def _is_punct(tok: _Tok | None, *texts: str) -> bool:
    return tok is not None and tok.kind == "punct" and tok.text in texts


def _clause_source(toks: list[_Tok], i: int) -> _Tok | None:
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
    """
    toks = _tokenize(source)
    found: dict[int, ImportRef] = {}

    def add(lit: _Tok | None, kind: ImportKind) -> None:
        if lit is None or lit.kind not in ("str", "tpl") or "\\" in lit.text:
            return
        found.setdefault(lit.start, ImportRef(lit.text, lit.start + 1, lit.end - 1, kind))

    def at(j: int) -> _Tok | None:
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
    return [found[k] for k in sorted(found)]


# --------------------------------------------------------------------------------------------
# Specifiers.

_SPECIFIER_RE = re.compile(
    r"(?P<name>(?:@[^/@\s]+/)?[^/@\s]+)(?:@(?P<range>[^/\s]+))?(?P<subpath>/.*)?\Z", re.S
)
_URL_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Characters encodeURIComponent leaves alone: npm's "URL-friendly".
_URL_SAFE_RE = re.compile(r"[A-Za-z0-9\-_.!~*'()]+")
_MAX_NAME_LENGTH = 214
_EXCLUDED_NAMES = frozenset({"node_modules", "favicon.ico"})

# npm's semver range grammar (node-semver, non-loose), whitespace included for package.json.
_NR = r"(?:0|[1-9][0-9]*)"
_XR = rf"(?:[xX*]|{_NR})"
_PRE_ID = r"(?:[0-9]*[A-Za-z-][0-9A-Za-z-]*|0|[1-9][0-9]*)"
_QUALIFIER = rf"(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
_PARTIAL = rf"[v=]*{_XR}(?:\.{_XR}(?:\.{_XR}{_QUALIFIER})?)?"
_SIMPLE = rf"(?:(?:~>?|\^|[<>]=?|=)\s*)?{_PARTIAL}"
_ONE_RANGE = rf"(?:{_PARTIAL}\s+-\s+{_PARTIAL}|{_SIMPLE}(?:\s+{_SIMPLE})*|)"
_SEMVER_RANGE_RE = re.compile(rf"\s*{_ONE_RANGE}(?:\s*\|\|\s*{_ONE_RANGE})*\s*", re.ASCII)
# A dist-tag. Starting with a letter or digit keeps npm from reading it as a path
# ("..", "./x") when it lands in package.json.
_DIST_TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAX_RANGE_LENGTH = 256


def _name_problem(name: str) -> str | None:
    """Why npm would refuse ``name`` (validate-npm-package-name's errors), or None.

    Mixed case and the special characters ~'!()* are only warnings in npm: old packages such as
    ``JSONStream`` have them and ``npm install`` still accepts them, so they are allowed here.
    Longer than 214 characters is also only a warning in npm, but no such package is worth
    supporting, so it is refused.
    """
    if len(name) > _MAX_NAME_LENGTH:
        return f"is longer than {_MAX_NAME_LENGTH} characters"
    if name.lower() in _EXCLUDED_NAMES:
        return "is reserved"
    for char, what in ((".", "a period"), ("-", "a hyphen"), ("_", "an underscore")):
        if name.startswith(char):
            return f"starts with {what}"
    if name.startswith("@"):
        scope, _, pkg = name[1:].partition("/")
        if pkg.startswith("."):
            return "starts with a period"
        parts = [scope, pkg]
    else:
        parts = [name]
    if not all(part and _URL_SAFE_RE.fullmatch(part) for part in parts):
        return "has characters that are not URL-friendly"
    return None


def _is_registry_range(value: str) -> bool:
    """A semver range, an exact version or a dist-tag: something npm takes from the registry."""
    if len(value) > _MAX_RANGE_LENGTH:
        return False
    return bool(_SEMVER_RANGE_RE.fullmatch(value) or _DIST_TAG_RE.fullmatch(value))


def parse_specifier(spec: str) -> PackageSpec | None:
    """Split a module specifier into an npm package, or None when it names no package.

    None for relative and absolute paths, package-internal ``#imports``, URLs (``node:``,
    ``https:``, ``data:``, ...) and Node built-ins. Raises ``InvalidComponent`` for a bare
    specifier npm could not install (bad package name or version range).
    """
    if spec.startswith(("./", "../", "/", "#")) or spec in (".", ".."):
        return None
    if _URL_SCHEME_RE.match(spec) or spec in NODE_BUILTIN_MODULES:
        return None
    m = _SPECIFIER_RE.match(spec)
    if m is None:
        raise InvalidComponent(f"Invalid module specifier {spec!r}: not a package name")
    name, rng, subpath = m.group("name"), m.group("range"), m.group("subpath")
    problem = _name_problem(name)
    if problem is not None:
        raise InvalidComponent(
            f"Invalid module specifier {spec!r}: package name {name!r} {problem}"
        )
    if rng is not None and not _is_registry_range(rng):
        raise InvalidComponent(
            f"Invalid module specifier {spec!r}: {rng!r} is not a version, semver range or dist-tag"
        )
    return PackageSpec(name=name, range=rng, subpath=subpath)


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
    if not isinstance(value, str) or not _is_registry_range(value):
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
    declared = _declared_ranges(package_json)
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

    return DependencyPlan(
        dependencies=dependencies, files=rewritten, key=dependencies_key(dependencies)
    )
