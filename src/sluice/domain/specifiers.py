"""npm module specifiers: what a bare specifier names (package, pinned range, subpath), and
whether npm could install it (validate-npm-package-name's rules, node-semver's range grammar).

Pipedream components may pin a version in the specifier itself: ``require("axios@0.19.2")``,
``import _ from "lodash@^4"``, ``import x from "@scope/name@1.2.3/sub/path.js"``. Pure (no I/O).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sluice.errors import InvalidComponent

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


def is_registry_range(value: str) -> bool:
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
    if rng is not None and not is_registry_range(rng):
        raise InvalidComponent(
            f"Invalid module specifier {spec!r}: {rng!r} is not a version, semver range or dist-tag"
        )
    return PackageSpec(name=name, range=rng, subpath=subpath)
