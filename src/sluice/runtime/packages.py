"""Published npm packages fetched whole, as ``npm pack`` downloads them (``registry import``).

``npm pack`` runs with the dependency store's environment, so it uses the same registry and
download cache as installs; a package is unpacked once into ``root/<name>@<version>/`` and
read from there afterwards. The tarball is extracted with tarfile's ``data`` filter (no links
out, no absolute paths, no devices).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sluice.errors import DependencyInstallFailed
from sluice.runtime.deps import DependencyStore

#: Files read from a package: code and JSON; README, LICENSE and the rest stay out.
_READ = (".mjs", ".js", ".cjs", ".json")
_MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    #: ``{relative path: text}`` of the package's code and JSON files.
    files: dict[str, str]


class PackageFetcher:
    def __init__(self, root: Path, store: DependencyStore, *, timeout: float = 120.0) -> None:
        self.root = Path(root)
        self.store = store
        self.timeout = timeout

    async def fetch(self, spec: str, *, offline_first: bool = False) -> Package:
        """The package ``spec`` names (``@pipedream/slack@0.10.3``), downloaded if needed.

        ``offline_first`` (an exact version) lets npm answer from its cache without asking the
        registry. Raises ``DependencyInstallFailed`` with npm's reason (404, no such version).
        """
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{secrets.token_hex(6)}"
        await asyncio.to_thread(tmp.mkdir)
        try:
            meta = await self._pack(spec, tmp, offline_first)
            name, version = str(meta["name"]), str(meta["version"])
            target = self.root / f"{name.replace('/', '+')}@{version}"
            if not (target / "package" / "package.json").is_file():
                await asyncio.to_thread(_extract, tmp / str(meta["filename"]), target)
            files = await asyncio.to_thread(_read_files, target / "package")
            return Package(name, version, files)
        finally:
            await asyncio.to_thread(shutil.rmtree, tmp, True)

    async def _pack(self, spec: str, cwd: Path, offline_first: bool) -> dict[str, object]:
        args = ["pack", spec, "--json", "--pack-destination", str(cwd), "--loglevel=error"]
        if offline_first:
            args.append("--prefer-offline")
        proc = await asyncio.create_subprocess_exec(
            self.store.npm,
            *args,
            cwd=cwd,
            env=self.store.npm_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise DependencyInstallFailed(
                f"npm pack {spec} timed out after {self.timeout:g} s"
            ) from None
        if proc.returncode != 0:
            lines = [
                line.removeprefix("npm error").strip()
                for line in err.decode(errors="replace").splitlines()
                if line.startswith("npm error") and "complete log" not in line
            ]
            reason = "; ".join(line for line in lines if line)[:500] or f"exit {proc.returncode}"
            raise DependencyInstallFailed(f"npm pack {spec} failed: {reason}")
        try:
            (meta,) = json.loads(out)
        except ValueError as exc:
            raise DependencyInstallFailed(f"npm pack {spec}: unexpected output") from exc
        return dict(meta)


def _extract(tarball: Path, target: Path) -> None:
    tmp = target.parent / f".tmp-x-{secrets.token_hex(6)}"
    try:
        with tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
        if not target.exists():
            tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_files(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or not rel.endswith(_READ) or "node_modules/" in rel:
            continue
        if path.stat().st_size > _MAX_FILE_BYTES:
            continue
        try:
            files[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files
