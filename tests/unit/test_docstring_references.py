"""Docstrings name only code that exists (issue 28: eight named functions or modules that had
gone or moved). A docstring's double-backquoted reference is checked when it is one of:

- a file, ``engine/queue/jobs.py`` or ``runner.mjs``: some file of that path or name exists;
- a dotted path that starts with a module, ``storage.jobs.complete_sync``: each name after the
  module exists somewhere in the package, as a name, an attribute or an identifier-like string
  (a table's column); an instance's attributes cannot be followed by a static reading;
- ``Class.member``, with ``Class`` defined in the package: one of the classes of that name has
  the member;
- ``function()``: a function of that name is defined in the package (Python or JavaScript).

Anything else (plain words, environment variables, JSON keys, other packages' names, files of
Pipedream's such as ``common-app.mjs``, relative and example paths) is not judged. Migrations are left out: they describe the schema of their day.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "sluice"
_REF = re.compile(r"``([^`\s]+)``")
_FILE = re.compile(r"[\w./-]+\.(?:py|mjs|js)")
_OWN_FILE = re.compile(r"\w+\.(?:py|mjs|js)")
_OTHER_FILE = re.compile(r".+\.(?:yaml|yml|json|md|toml|txt|html|css)")
_CODE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?")


@dataclass
class Package:
    modules: dict[str, set[str]] = field(default_factory=dict)  # dotted name → top-level names
    classes: dict[str, set[str]] = field(default_factory=dict)  # class name → member names
    functions: set[str] = field(default_factory=lambda: set(dir(builtins)))
    everything: set[str] = field(default_factory=lambda: set(dir(builtins)))
    files: set[str] = field(default_factory=set)
    docstrings: list[tuple[str, int, str]] = field(default_factory=list)
    suffixes: dict[str, list[str]] = field(
        default_factory=dict
    )  # "jobs" → ["sluice.engine.queue.jobs"]


def _top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _read() -> Package:
    package = Package()
    for path in SRC.rglob("*"):
        if path.is_file():
            package.files |= {path.name, str(path.relative_to(SRC))}
    for path in sorted(SRC.rglob("*.py")):
        if "migrations/versions" in path.as_posix():
            continue
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        package.modules[module] = _top_names(tree)
        where = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                package.functions.add(node.name)
            if isinstance(node, ast.ClassDef):
                members = package.classes.setdefault(node.name, set())
                for inner in ast.walk(node):
                    if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        members.add(inner.name)
                    elif isinstance(inner, ast.Attribute):
                        members.add(inner.attr)
                    elif isinstance(inner, ast.Name):
                        members.add(inner.id)
            if isinstance(node, ast.Name):
                package.everything.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                package.everything |= set(re.findall(r"[A-Za-z_]\w*", node.value))
            elif isinstance(node, ast.Attribute):
                package.everything.add(node.attr)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    package.docstrings.append((where, getattr(node, "lineno", 1), doc))
    for path in SRC.rglob("*.mjs"):
        text = path.read_text()
        package.functions |= set(
            re.findall(r"\b([A-Za-z_$][\w$]*)\s*(?:\(|=\s*(?:async\s*)?\()", text)
        )
    for members in package.classes.values():
        package.everything |= members
    for module, names in package.modules.items():
        package.everything |= names
        parts = module.split(".")
        for i in range(1, len(parts)):
            package.suffixes.setdefault(".".join(parts[i:]), []).append(module)
    return package


def _exists(package: Package, ref: str) -> bool | None:
    """True or False when ``ref`` is a reference this test judges, None when it is not."""
    if _OTHER_FILE.fullmatch(ref):
        return None
    if _FILE.fullmatch(ref):
        if "/" not in ref:
            return ref in package.files if _OWN_FILE.fullmatch(ref) else None
        first = ref.split("/", 1)[0]
        if first in ("tests", "docs", "bench", "bin", "src"):
            return (ROOT / ref).exists()
        if re.fullmatch(r"\w+", first) and (SRC / first).is_dir():
            return ref in package.files
        return None  # an example path (sources/x/x.mjs)
    if not _CODE.fullmatch(ref):
        return None
    call = ref.endswith("()")
    parts = ref.removesuffix("()").split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        modules = [head] if head in package.modules else package.suffixes.get(head, [])
        if not modules or (i == 1 and len(parts) == 1 and not call):
            continue
        rest = parts[i:]
        if not rest:
            return True
        return all(name in package.everything for name in rest)
    if parts[0] in package.classes and len(parts) > 1:
        return all(name in package.classes[parts[0]] for name in parts[1:])
    if call and len(parts) == 1:
        return parts[0] in package.functions
    return None


def test_every_code_reference_in_a_docstring_exists() -> None:
    package = _read()
    missing = [
        f"{where}:{line}: ``{ref}``"
        for where, line, doc in package.docstrings
        for ref in _REF.findall(doc)
        if _exists(package, ref) is False
    ]
    assert not missing, "docstrings name code that does not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_stale_reference() -> None:
    package = _read()
    assert _exists(package, "Ingress.run_job") is False  # issue 28's example: a method gone
    assert _exists(package, "HttpJobs.__call__") is True
    assert _exists(package, "storage.jobs.complete_sync") is True
    assert _exists(package, "storage.jobs.no_such_function") is False
    assert _exists(package, "accounts.error_workflow_id") is True  # a column, named in a string
    assert _exists(package, "engine/no_such_module.py") is False
    assert _exists(package, "no_such_function()") is False
    assert _exists(package, "SLUICE_PORT") is None
