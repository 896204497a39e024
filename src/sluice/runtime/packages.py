"""Published npm packages fetched whole, as ``npm pack`` downloads them (``registry import``).

With the sandbox on, ``npm pack`` runs in the npm jail installs run in (``npm_jail.py``, issue
25): no host file, a sized tmpfs to work in, the registry its only way out; its tarball comes
back as a tar stream. Without it, ``npm pack`` runs with the dependency store's environment
(its registry and download cache). A package is unpacked once into ``root/<name>@<version>/``
and read from there afterwards. The tarball is extracted with tarfile's ``data`` filter (no
links out, no absolute paths, no devices); its name and version are read from its own
``package.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sluice.errors import DependencyInstallFailed
from sluice.runtime.deps import DependencyStore
from sluice.runtime.sandbox import no_strays

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
            await self._pack(spec, tmp, offline_first)
            tarballs = list(tmp.glob("*.tgz"))
            if len(tarballs) != 1:
                raise DependencyInstallFailed(f"npm pack {spec}: no tarball came back")
            name, version = await asyncio.to_thread(_name_and_version, tarballs[0], spec)
            target = self.root / f"{name.replace('/', '+')}@{version}"
            if not (target / "package" / "package.json").is_file():
                await asyncio.to_thread(_extract, tarballs[0], target)
            files = await asyncio.to_thread(_read_files, target / "package")
            return Package(name, version, files)
        finally:
            await asyncio.to_thread(shutil.rmtree, tmp, True)

    async def _pack(self, spec: str, cwd: Path, offline_first: bool) -> None:
        """``npm pack spec`` leaving its tarball in ``cwd``: in the npm jail when there is one
        (the dependency store's), else as the server's user."""
        args = ["pack", spec, "--loglevel=error", *self.store.fetch_flags]
        if offline_first:
            args.append("--prefer-offline")
        jail = self.store.jail
        if jail is None:
            args += ["--pack-destination", str(cwd)]
            await self._run(spec, [self.store.npm, *args], (), cwd)
            return
        async with jail.enter(None, cwd, self.store.npm, args, keep=".") as jailed:
            # uvloop ignores close_fds: none of the server's descriptors may reach the jail.
            no_strays(set(jailed.pass_fds))
            await self._run(spec, jailed.argv, jailed.pass_fds, None)

    async def _run(
        self, spec: str, argv: list[str], pass_fds: tuple[int, ...], host_cwd: Path | None
    ) -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=host_cwd or "/",
            env=self.store.npm_env() if host_cwd is not None else {},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=pass_fds,
            start_new_session=True,  # its own process group, so a kill reaches children
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
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


def _name_and_version(tarball: Path, spec: str) -> tuple[str, str]:
    """The package's name and version, from its ``package/package.json``."""
    try:
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/package.json")
            manifest = json.loads(member.read()) if member is not None else {}
    except (KeyError, tarfile.TarError, ValueError) as exc:
        raise DependencyInstallFailed(f"npm pack {spec}: the tarball has no package.json") from exc
    name, version = manifest.get("name"), manifest.get("version")
    # Both name a directory (``root/<name>@<version>``): nothing that climbs out of it.
    if (
        not isinstance(name, str)
        or not isinstance(version, str)
        or ".." in f"{name}{version}"
        or "/" in version
        or name.count("/") > 1
    ):
        raise DependencyInstallFailed(f"npm pack {spec}: the tarball names no package")
    return name, version


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
