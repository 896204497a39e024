"""A component's files, as deploy, dev and publish send them.

The entry file, every file it imports by relative path (recursively), and the nearest
``package.json`` (its dependency ranges are honoured), so a component laid out as in
Pipedream's registry (``sources/x/x.mjs`` importing ``../../app.app.mjs``) works straight from
a checkout. Paths are relative to the package root: the directory of the nearest
``package.json``, widened to hold every imported file; without one, the entry's directory
(widened likewise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.domain import imports
from sluice.errors import CliError

#: What Node tries for an extensionless relative import (CommonJS ``require("./lib")``).
_SUFFIXES = (".mjs", ".js", ".cjs", ".json")
_INDEXES = ("index.js", "index.mjs", "index.cjs", "index.json")
#: Beyond this the server refuses the upload anyway (``SLUICE_MAX_COMPONENT_BYTES``).
_MAX_FILES = 500


@dataclass(frozen=True)
class Bundle:
    root: Path
    entry_path: str
    code: str
    #: The other files, ``{posix path relative to root: text}``.
    files: dict[str, str]

    def body(self) -> dict[str, Any]:
        """The component fields of ``POST /v1/components``, ``POST``/``PUT /v1/sources``."""
        body: dict[str, Any] = {"component_code": self.code, "component_path": self.entry_path}
        if self.files:
            body["files"] = self.files
        return body

    def paths(self) -> set[Path]:
        """Every file, absolute (what ``dev`` watches)."""
        return {self.root / self.entry_path, *(self.root / p for p in self.files)}


def collect(entry: Path) -> Bundle:
    entry = Path(os.path.abspath(entry))
    if not entry.is_file():
        raise CliError(f"{entry}: no such file", code="usage")
    found: dict[Path, str] = {}
    pending = [entry]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found[current] = _read(current)
        if len(found) > _MAX_FILES:
            raise CliError(f"{entry} imports over {_MAX_FILES} files", code="usage")
        if not current.name.endswith(imports.SCANNED_EXTENSIONS):
            continue
        for ref in imports.find_imports(found[current]):
            spec = ref.specifier
            if not (spec.startswith(("./", "../")) or spec in (".", "..")):
                continue  # npm packages and built-ins: the server installs them
            target = _resolve(current.parent, spec.split("?")[0].split("#")[0])
            if target is None:
                raise CliError(
                    f"{_show(current)} imports {spec!r}, which does not exist", code="usage"
                )
            if "node_modules" in target.parts:
                raise CliError(
                    f"{_show(current)} imports {spec!r} from node_modules by path: import the "
                    "package by name instead",
                    code="usage",
                )
            pending.append(target)
    package_json = _nearest_package_json(entry.parent)
    if package_json is not None:
        found[package_json] = _read(package_json)
    root = Path(os.path.commonpath([p.parent for p in found]))
    files = {p.relative_to(root).as_posix(): text for p, text in found.items() if p != entry}
    return Bundle(
        root, entry.relative_to(root).as_posix(), found[entry], dict(sorted(files.items()))
    )


def _resolve(directory: Path, spec: str) -> Path | None:
    base = Path(os.path.normpath(directory / spec))
    candidates = [base, *(base.with_name(base.name + s) for s in _SUFFIXES)]
    candidates += [base / name for name in _INDEXES]
    return next((c for c in candidates if c.is_file()), None)


def _nearest_package_json(directory: Path) -> Path | None:
    for folder in (directory, *directory.parents):
        candidate = folder / "package.json"
        if candidate.is_file():
            return candidate
    return None


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{_show(file)} is not UTF-8 text", code="usage") from exc
    except OSError as exc:
        raise CliError(f"cannot read {_show(file)}: {exc.strerror}", code="usage") from exc


def _show(file: Path) -> str:
    try:
        return str(file.relative_to(Path.cwd()))
    except ValueError:
        return str(file)
