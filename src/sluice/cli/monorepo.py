"""Reading Pipedream's monorepo for ``sluice registry import <path>``: a checkout (a git
clone: ``.git`` is skipped), any directory laid out as it is, or an archive of one
(``.tar.gz``/``.tgz``/``.tar``, as GitHub serves it). Each ``components/<app>/`` with a
``package.json`` is an app directory, sent to the server as its files
(``POST /v1/registry/imports {"directories": [...]}``): only its ``.mjs``/``.js``/``.cjs``/
``.json`` files, never ``node_modules``."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

from sluice.domain import packages
from sluice.errors import CliError

#: A file larger than this is left out (npm packages' reader does the same).
_MAX_FILE_BYTES = 1_000_000
_ARCHIVES = (".tar.gz", ".tgz", ".tar")


def is_local(arg: str) -> bool:
    """Whether an argument of ``registry import`` names a directory or an archive here."""
    path = Path(arg)
    return path.is_dir() or (path.is_file() and arg.endswith(_ARCHIVES))


def app_directories(arg: str, apps: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """``(app, {relative path: text})`` of each app directory in ``arg`` (only ``apps`` when
    given: each must be there)."""
    path = Path(arg)
    if path.is_dir():
        yield from _apps(_Directory(path), arg, apps)
        return
    try:
        with tarfile.open(path) as archive:
            yield from _apps(_Archive(archive), arg, apps)
    except (tarfile.TarError, OSError) as exc:
        raise CliError(f"{arg}: not a readable archive: {exc}", code="usage") from exc


def _apps(
    reader: _Directory | _Archive, arg: str, apps: list[str]
) -> Iterator[tuple[str, dict[str, str]]]:
    roots = packages.app_roots(reader.paths())
    if not roots:
        raise CliError(
            f"{arg}: no app directory (components/<app>/package.json) found", code="usage"
        )
    missing = [a for a in apps if a not in roots]
    if missing:
        raise CliError(f"{arg}: no components/{missing[0]}/ with a package.json", code="usage")
    for app in apps or sorted(roots):
        yield app, packages.tree_files(reader.read(roots[app]), roots[app])


class _Directory:
    def __init__(self, root: Path) -> None:
        self.root = root

    def paths(self, under: str = "") -> list[str]:
        """Every file under ``under``, relative to the root (no node_modules, no hidden)."""
        found = []
        for current, dirs, names in os.walk(self.root / under):
            dirs[:] = [d for d in dirs if d != "node_modules" and not d.startswith(".")]
            rel = Path(current).relative_to(self.root).as_posix()
            found += [n if rel == "." else f"{rel}/{n}" for n in names]
        return found

    def read(self, root: str) -> dict[str, str]:
        out = {}
        for rel in self.paths(root):
            full = self.root / rel
            if not rel.endswith(packages.TREE_SUFFIXES) or full.is_symlink():
                continue
            if full.stat().st_size <= _MAX_FILE_BYTES:
                text = _text(full.read_bytes())
                if text is not None:
                    out[rel] = text
        return out


class _Archive:
    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        # Regular files only, by a clean relative path (no links, no "..", nothing absolute).
        self.members = {
            m.name.removeprefix("./"): m
            for m in tar.getmembers()
            if m.isreg() and not m.name.startswith("/") and ".." not in m.name.split("/")
        }

    def paths(self) -> list[str]:
        return list(self.members)

    def read(self, root: str) -> dict[str, str]:
        prefix = f"{root}/" if root else ""
        out = {}
        for name, member in self.members.items():
            if not name.startswith(prefix) or not name.endswith(packages.TREE_SUFFIXES):
                continue
            handle = self.tar.extractfile(member) if member.size <= _MAX_FILE_BYTES else None
            text = _text(handle.read() if handle is not None else None)
            if text is not None:
                out[name] = text
        return out


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
