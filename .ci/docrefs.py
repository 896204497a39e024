"""Docstring references to names that do not exist (run by .ci/run after vulture).

A docstring or a doc names code in backticks: a module path (``engine/queue/jobs.py``,
``storage/jobs.add_batch``), a dotted name (``JobWorker.run_now``, ``sluice.engine.ingress``,
``errors.LeaseLost``), a call (``drain()``) or a class (``DueTimer``). When the code moves on and
the text does not, the reader is sent to something that is not there. This check reads every
docstring of ``src/sluice`` (module, class, function) and resolves each such reference:

- a path: to a file of the repository, relative to the repository, to ``src/sluice``, to the
  module's own directory, or by its tail (``handlers/emit.py`` is
  ``src/sluice/engine/handlers/emit.py``); a tail after the file (``storage/jobs.add_batch``)
  must be an attribute of that module. A path git ignores is one the code writes: accepted.
  Paths in prose outside backticks are checked too when they end with a file's extension;
- a dotted name: its first part in the module's own namespace (what it defines or imports),
  else ``sluice``, a module of its package or the packages above, else any module of
  ``src/sluice`` by its last name (``database.Writer``), any class (``JobWorker.stop``; an
  instance named for it: ``platform.jobs.drain()``), any top-level function or constant; the
  first of these that knows the name decides. Each further part must be an attribute of what
  came before (a class's methods, fields, ``self.x`` assignments and its bases' attributes; a
  module's top-level names and submodules); a table's column is one (``runs.pause``). What is
  imported from outside Sluice, a function or a value is not followed;
- ``name()``: a function or method defined in ``src/sluice`` (Python, or the JavaScript of
  the runtime and the core components, where ``run()`` and ``respond()`` live);
- a class-shaped word (two capitals, ``DueTimer``): a class, function or constant of
  ``src/sluice``, a builtin, or an attribute of a library the module imports.

Low false positives by design rather than by listing: only the shapes above are checked; a
dotted name whose first part is lowercase, found nowhere and not a library is taken as not
Python (``process.env``, ``verdict.addresses``) unless a class follows it (``holds.Slots``);
one-capital words (``Origin``, ``Cookie``) are not checked; words with ``$``, ``<``, ``*``,
``{``, spaces, ``@``, ``:`` or a leading ``/`` (URL paths) are not code; a path counts only when
its first part is a top-level entry of the repository or a package of ``src/sluice``
(``multipart/form-data`` is not a path). ``.ci/docrefs_allow.txt`` lists the few deliberate
non-code words that still look like code, each with its reason.

``docs/*.md`` and ``CONTRIBUTING.md`` are checked for paths (``src/...``, ``engine/...``,
``tests/...``), and for backticked dotted names that start with a class.

Exit status 1 and one line per stale reference (``file:line: `ref`: why``), else 0.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PKG = SRC / "sluice"
ALLOW = Path(__file__).with_name("docrefs_allow.txt")

TICKS = re.compile(r"``([^`\n]+)``|(?<!`)`([^`\n]+)`(?!`)")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"^{IDENT}(\.{IDENT})+(\(\))?$")
CALL = re.compile(rf"^({IDENT})\(\)$")
#: A class-shaped word: two capitals at least and a small letter (``DueTimer``, ``JSONStream``);
#: one capital (``Origin``, ``Cookie``) is as often a header or a plain word, and is not checked.
CAMEL = re.compile(
    r"^_?(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z][A-Za-z0-9]*[A-Z])[A-Z][A-Za-z0-9]*$"
)
FILE_EXT = (".py", ".mjs", ".js", ".md", ".toml", ".json", ".yaml", ".yml", ".cfg", ".txt", ".sh")
#: The shape of a path (whether it is one: ``Index.roots``).
PATH_TOKEN = re.compile(r"^(\.{0,2}/)?[\w.-]+(/[\w.-]+)*/?(::\w+)?$")
#: A path in prose, not in backticks: a known first part and a file's extension
#: (``see engine/runs/executor.py``), so "deploy/update/delete" is prose.
BARE_PATH = re.compile(
    r"(?<![\w/.`-])((?:src|tests|bench|docs|bin|deploy|\.ci|engine|storage|domain|api|web|cli|"
    r"runtime|platform|handlers)/[\w./-]*\.(?:py|mjs|js|md|toml|json|ya?ml|sh)(?:\.[A-Za-z_]\w*)*)"
)
JS_DEF = re.compile(rf"\b({IDENT})\s*(?:\(|:|=\s*(?:async\s*)?(?:function|\())")


@dataclass
class Module:
    name: str  # sluice.engine.queue.jobs
    path: Path
    tree: ast.Module
    #: Top-level names: ("def", node) | ("mod", module name) | ("sym", module, name) | ("ext",)
    names: dict[str, tuple[object, ...]] = field(default_factory=dict)


@dataclass
class Index:
    modules: dict[str, Module]
    files: set[str]  # repository paths, relative
    classes: dict[str, list[tuple[Module, ast.ClassDef]]]
    defs: dict[str, list[tuple[Module, ast.AST]]]  # top-level functions and assignments
    methods: set[str]
    js_names: set[str]
    #: Tables and their columns (``storage/tables.py``): ``runs.pause`` is a column.
    tables: dict[str, set[str]]
    #: The first parts a path is checked by: the repository's top-level entries, the packages
    #: of src/sluice (``engine``, ``queue``, ``handlers``...) and ``js``.
    roots: set[str]
    allow: set[str]


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _top_names(mod: Module) -> None:
    package = mod.name if mod.path.name == "__init__.py" else mod.name.rpartition(".")[0]

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            for name in _targets(node):
                mod.names[name] = ("def", node)
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        sluice = a.name.startswith("sluice")
                        mod.names[a.asname] = ("mod", a.name) if sluice else ("ext", a.name)
                    else:
                        top = a.name.split(".")[0]
                        mod.names[top] = ("mod", top) if top == "sluice" else ("ext", top)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for a in node.names:
                    local = a.asname or a.name
                    if base.startswith("sluice"):
                        mod.names[local] = ("sym", base, a.name)
                    else:
                        mod.names[local] = ("ext", f"{base}.{a.name}")
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)

    visit(mod.tree.body)


def build_index() -> Index:
    modules: dict[str, Module] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        mod = Module(".".join(parts), path, ast.parse(path.read_text(), str(path)))
        _top_names(mod)
        modules[mod.name] = mod
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    files = set(tracked)
    for f in tracked:  # directories too
        parts = f.split("/")
        for i in range(1, len(parts)):
            files.add("/".join(parts[:i]))
    classes: dict[str, list[tuple[Module, ast.ClassDef]]] = {}
    defs: dict[str, list[tuple[Module, ast.AST]]] = {}
    methods: set[str] = set()
    for mod in modules.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append((mod, node))
                for item in node.body:
                    methods.update(_targets(item))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.add(node.name)
        for node in mod.tree.body:
            for name in _targets(node):
                defs.setdefault(name, []).append((mod, node))
    js_names: set[str] = set()
    for js in list(PKG.rglob("*.mjs")) + list(PKG.rglob("*.js")):
        if "node_modules" not in js.parts and "static" not in js.parts:
            js_names.update(JS_DEF.findall(js.read_text(errors="replace")))
    allow = set()
    if ALLOW.exists():
        for line in ALLOW.read_text().splitlines():
            word = line.split("#", 1)[0].strip()
            if word:
                allow.add(word)
    roots = {f.split("/", 1)[0] for f in tracked} | {"js"}
    roots |= {p.parent.name for p in PKG.rglob("__init__.py")}
    tables: dict[str, set[str]] = {}
    for node in ast.walk(modules["sluice.storage.tables"].tree):
        if _call_of(node, "Table"):
            assert isinstance(node, ast.Call)
            columns = tables.setdefault(str(node.args[0].value), set())  # type: ignore[attr-defined]
            columns.update(str(c.args[0].value) for c in node.args if _call_of(c, "Column"))  # type: ignore[attr-defined]
    return Index(modules, files, classes, defs, methods, js_names, tables, roots, allow)


def _call_of(node: ast.AST, name: str) -> bool:
    """``sa.Table("runs", ...)``, ``sa.Column("pause", ...)``: a call with a name first."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    return called == name and isinstance(first, ast.Constant) and isinstance(first.value, str)


# Resolution: True (found), False (not there), None (cannot tell: outside Sluice).


def _class_attrs(
    ix: Index, mod: Module, cls: ast.ClassDef, name: str, seen: int = 0
) -> bool | None:
    for item in cls.body:
        if name in _targets(item):
            return True
    for node in ast.walk(cls):  # self.name = ... in any method
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr == name
        ):
            return True
    unknown_base = False
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name):
            base_name = base.value.id
        if base_name in {"object", "Protocol", "Generic"}:
            continue
        found = _lookup_class(ix, mod, base_name) if base_name and seen < 8 else None
        if found is None:
            unknown_base = True
            continue
        got = _class_attrs(ix, found[0], found[1], name, seen + 1)
        if got is None:
            unknown_base = True
        elif got:
            return True
    return None if unknown_base else False


def _lookup_class(ix: Index, mod: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
    entry = mod.names.get(name)
    if entry and entry[0] == "def" and isinstance(entry[1], ast.ClassDef):
        return mod, entry[1]
    if entry and entry[0] == "sym":
        target = ix.modules.get(str(entry[1]))
        if target:
            return _lookup_class(ix, target, str(entry[2]))
    return None


def _resolve_in(ix: Index, obj: tuple[object, ...], attrs: list[str]) -> bool | None:
    """Follow ``attrs`` from ``obj``: ("mod", name) | ("cls", Module, ClassDef) | ("sym", ...)."""
    for i, attr in enumerate(attrs):
        kind = obj[0]
        if kind == "mod":
            name = str(obj[1])
            if f"{name}.{attr}" in ix.modules:
                obj = ("mod", f"{name}.{attr}")
                continue
            mod = ix.modules.get(name)
            if mod is None:
                return False
            entry = mod.names.get(attr)
            if entry is None:
                return False
            obj = _entry(ix, mod, entry)
        elif kind == "cls":
            owner, cls = obj[1], obj[2]
            assert isinstance(owner, Module) and isinstance(cls, ast.ClassDef)
            inner = next(
                (n for n in cls.body if isinstance(n, ast.ClassDef) and n.name == attr), None
            )
            if inner is not None:
                obj = ("cls", owner, inner)
                continue
            found = _class_attrs(ix, owner, cls, attr)
            if found is not True:
                return found
            return True  # a method or field: what follows is not followed
        else:
            return None  # outside Sluice, or a function or value: not followed
        if obj[0] == "ext":
            return None
        if obj[0] == "leaf":
            return True if i == len(attrs) - 1 else None
    return True


def _entry(ix: Index, mod: Module, entry: tuple[object, ...], depth: int = 0) -> tuple[object, ...]:
    kind = entry[0]
    if kind == "def":
        node = entry[1]
        return ("cls", mod, node) if isinstance(node, ast.ClassDef) else ("leaf",)
    if kind == "mod":
        return entry
    if kind == "sym":
        base, name = str(entry[1]), str(entry[2])
        if f"{base}.{name}" in ix.modules:
            return ("mod", f"{base}.{name}")
        target = ix.modules.get(base)
        if target is None or depth > 8:
            return ("ext",)
        inner = target.names.get(name)
        return _entry(ix, target, inner, depth + 1) if inner else ("missing",)
    return ("ext",)


def _package_of(mod: Module) -> str:
    return mod.name if mod.path.name == "__init__.py" else mod.name.rpartition(".")[0]


def resolve_dotted(ix: Index, mod: Module | None, ref: str) -> str | None:
    """None when ``ref`` names something that exists (or cannot be told); else why not."""
    parts = ref.removesuffix("()").split(".")
    head, rest = parts[0], parts[1:]
    # The first of these that knows the name decides: the module's own namespace (what it
    # defines or imports), then ``sluice.…``, the modules of its package and the packages above,
    # then any module by its last name, any class (or an instance named for it:
    # ``platform.jobs.drain()``), any top-level function or constant.
    tiers: list[list[tuple[object, ...]]] = [[], [], [], [], []]
    if mod is not None and head in mod.names:
        tiers[0].append(_entry(ix, mod, mod.names[head]))
    if head == "sluice":
        tiers[1].append(("mod", "sluice"))
    if mod is not None:
        package = _package_of(mod)
        while package:
            if f"{package}.{head}" in ix.modules:
                tiers[2].append(("mod", f"{package}.{head}"))
            package = package.rpartition(".")[0]
    tiers[3] += [("mod", name) for name in ix.modules if name.rsplit(".", 1)[-1] == head]
    tiers[3] += [("cls", m, c) for m, c in ix.classes.get(head, [])]
    if head.islower():
        tiers[3] += [("cls", m, c) for m, c in ix.classes.get(head.capitalize(), [])]
    tiers[4] += [_entry(ix, m, ("def", n)) for m, n in ix.defs.get(head, [])]
    starts = next((tier for tier in tiers if tier), [])
    if not starts:
        if head[0].isupper() and head not in vars(builtins) and head not in ix.js_names:
            return f"no class or module `{head}` in src/sluice"
        if importlib.util.find_spec(head) is not None:
            return None  # a library's (``httpx.MockTransport``): not followed
        if rest and rest[0][:1].isupper() and rest[0][1:2].islower():
            return f"no module `{head}` in src/sluice"  # ``holds.Slots``: a module's class
        return None  # lowercase and nowhere: not Python (process.env, verdict.addresses)
    if head.islower():  # ``platform.jobs.drain()`` where ``platform`` is also a module
        starts += [("cls", m, c) for m, c in ix.classes.get(head.capitalize(), [])]
    if len(rest) == 1 and rest[0] in ix.tables.get(head, ()):
        return None  # a column: ``runs.pause``
    results = [_resolve_in(ix, s, rest) for s in starts if s[0] != "missing"]
    if any(r is not False for r in results):
        return None
    return f"`{head}` has no `{'.'.join(rest)}`"


def _outside(mod: Module, word: str) -> bool:
    """``word`` is an attribute of a library the module imports (``asyncio.StreamReader``)."""
    for entry in mod.names.values():
        if entry[0] == "ext" and len(entry) > 1:
            try:
                lib = importlib.import_module(str(entry[1]))
            except ImportError:  # a name imported from a module, not a module
                lib = None
            if lib is not None and hasattr(lib, word):
                return True
    return False


def resolve_name(ix: Index, mod: Module | None, word: str, call: bool) -> str | None:
    if mod is not None and (word in mod.names or _outside(mod, word)):
        return None
    if word in vars(builtins) or word in ix.js_names or word in ix.defs or word in ix.classes:
        return None
    if call and word in ix.methods:
        return None
    if not call and any(f".{word}" in name or name == word for name in ix.modules):
        return None
    return "defined nowhere in src/sluice" if call else "no such class or name in src/sluice"


def resolve_path(ix: Index, base: Path | None, token: str) -> str | None:
    token = token.split("::", 1)[0]
    if token.startswith("../"):
        return None  # outside the repository (../shared/...)
    path = token.rstrip("/")
    tail: list[str] = []
    candidates = [path]
    # storage/jobs.add_batch, engine/queue/jobs.BatchHandler: a module and its attribute.
    last = path.rsplit("/", 1)[-1]
    if "." in last and not last.endswith(FILE_EXT):
        stem, *tail = last.split(".")
        candidates = [
            path.rsplit("/", 1)[0] + "/" + stem + ".py" if "/" in path else stem + ".py",
            path.rsplit("/", 1)[0] + "/" + stem if "/" in path else stem,
        ]
    roots = ["", "src/sluice/"]
    if base is not None:
        rel = base.relative_to(ROOT).as_posix()
        while rel not in ("", "."):
            roots.append(rel + "/")
            rel = rel.rpartition("/")[0]
    found: list[str] = []
    for cand in candidates:
        for root in roots:
            if root + cand in ix.files:
                found.append(root + cand)
        if not found:
            found += [f for f in ix.files if f.endswith("/" + cand) and f.startswith("src/")]
        if not found:
            found += [f for f in ix.files if f.endswith("/" + cand)]
        if found:
            break
    if not found and not path.rsplit("/", 1)[-1].count("."):
        return (
            resolve_path(ix, base, path + ".py")
            if not path.endswith(".py") and not tail
            else "no such file"
        )
    if not found:
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0
        return None if ignored else "no such file"  # an ignored file is one the code writes
    if not tail:
        return None
    for f in found:
        if f.startswith("src/") and f.endswith(".py"):
            name = (
                f.removeprefix("src/")
                .removesuffix(".py")
                .removesuffix("/__init__")
                .replace("/", ".")
            )
            if _resolve_in(ix, ("mod", name), tail) is not False:
                return None
        elif f.startswith("src/") and f.replace("src/", "", 1).replace("/", ".") in ix.modules:
            if (
                _resolve_in(ix, ("mod", f.replace("src/", "", 1).replace("/", ".")), tail)
                is not False
            ):
                return None
        else:
            return None
    return f"the module has no `{'.'.join(tail)}`"


def _looks_like_path(token: str, ix: Index) -> bool:
    if not PATH_TOKEN.match(token) or token.startswith("/"):
        return False
    if "/" not in token:
        return token.endswith(".py")
    if token.startswith("../"):
        return True
    return token.lstrip("./").split("/", 1)[0] in ix.roots


def check_ref(
    ix: Index, mod: Module | None, base: Path | None, ref: str, *, markdown: bool
) -> str | None:
    ref = ref.strip()
    if ref in ix.allow or not ref:
        return None
    if any(c in ref for c in "$<>*{}…@: \"'=,") and "::" not in ref:
        return None
    if _looks_like_path(ref, ix):
        return resolve_path(ix, base, ref)
    if "/" in ref or ref.endswith(FILE_EXT):
        return None
    if markdown:
        if DOTTED.match(ref) and ref[0].isupper():
            return resolve_dotted(ix, None, ref)
        return None
    if DOTTED.match(ref):
        return resolve_dotted(ix, mod, ref)
    if m := CALL.match(ref):
        return resolve_name(ix, mod, m.group(1), call=True)
    if CAMEL.match(ref):
        return resolve_name(ix, mod, ref, call=False)
    return None


def _docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0] if body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append((value.lineno, value.value))
    return out


def main() -> int:
    ix = build_index()
    problems: list[str] = []
    for mod in ix.modules.values():
        rel = mod.path.relative_to(ROOT)
        for line, doc in _docstrings(mod.tree):
            refs = [(m.start(), m.group(1) or m.group(2), False) for m in TICKS.finditer(doc)]
            bare = TICKS.sub(lambda m: " " * len(m.group(0)), doc)
            refs += [(m.start(), m.group(1).rstrip(".,;)"), True) for m in BARE_PATH.finditer(bare)]
            for start, ref, path_only in refs:
                why = check_ref(ix, mod, mod.path.parent, ref, markdown=path_only)
                if why:
                    at = line + doc.count("\n", 0, start)
                    problems.append(f"{rel}:{at}: `{ref}`: {why}")
    docs = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md"]
    for doc_path in docs:
        rel = doc_path.relative_to(ROOT)
        for at, text in enumerate(doc_path.read_text().splitlines(), 1):
            words = [m.group(1) or m.group(2) for m in TICKS.finditer(text)]
            bare = TICKS.sub(" ", text)
            words += [m.group(1).rstrip(".,;)") for m in BARE_PATH.finditer(bare)]
            for ref in words:
                why = check_ref(ix, None, None, ref, markdown=True)
                if why:
                    problems.append(f"{rel}:{at}: `{ref}`: {why}")
    for p in problems:
        print(p)
    if problems:
        allow = ALLOW.relative_to(ROOT)
        print(
            f"{len(problems)} stale reference(s): fix the text, or list a non-code word in {allow}"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
