"""The jail an ``npm install`` of user dependencies runs in (issue 25).

npm ran as the server's user (root, in most deployments) on the host: whatever code ran in
the install process (a package's install script, were scripts ever enabled; an exploit of
npm's tarball handling) could read the data directory and write anywhere. Now each install
runs like a runner (``sandbox.py``), in a jail of its own:

- bubblewrap with every namespace unshared, no capabilities, the runners' seccomp filter;
  ``/usr`` and a few files of ``/etc`` read-only, a sized ``/tmp``, the rest of ``/``
  read-only; the install's staging directory, writable, at ``/install`` (its cwd), and
  nothing else of the host (no data directory, no npm store, no other install);
- as root, under the account's jail uid (the one its runners use; a uid of this process for
  installs no account asked for) and in a memory and pids cgroup of its own; the staging
  directory is handed to that uid for the install and taken back (every file ``chown``-ed to
  the server's user) before it is measured and moved into the store;
- no network but its own ``lo``: ``js/npm-egress.mjs`` forwards npm's proxy connections to an
  egress proxy (``egress.py``) that lets through the npm registry's host and port only;
- npm's cache is the staging directory's own (``.npm-cache``, removed before the move), so
  no install can plant anything another account's install would read.

The store's directories stay private (0700 parents, which bubblewrap, running as the install's
uid, could not traverse even to bind a descriptor): npm works in a directory of the sandbox's
own (``sandbox.install_dir``, reachable through 0711 parents), which the server moves into the
store's staging directory once npm is done (a copy when they are on different filesystems).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sluice.domain import egress
from sluice.runtime.egress import EgressProxy
from sluice.runtime.sandbox import INSTALL_DIR, Sandbox

__all__ = ["INSTALL_DIR", "Jailed", "NpmJail"]

#: npm's cache and HOME, inside the staging directory (removed before it joins the store).
SCRATCH = (".npm-cache", ".home")
_DEFAULT_REGISTRY = "https://registry.npmjs.org/"

UidOf = Callable[[str], Awaitable[int | None]]


@dataclass(frozen=True)
class Jailed:
    """How to start npm in one install's jail: ``argv`` (the npm arguments go last) and the
    descriptors to pass on (``pass_fds``); run it with ``cwd="/"`` and an empty environment."""

    argv: list[str]
    pass_fds: tuple[int, ...]


class NpmJail:
    """Builds one jail per install. ``registry``: the registry npm uses (None: npm's own
    setting, asked once)."""

    def __init__(
        self, sandbox: Sandbox, *, uid_of: UidOf | None = None, registry: str | None = None
    ) -> None:
        self.sandbox = sandbox
        self.uid_of = uid_of
        self.registry = registry

    @contextlib.asynccontextmanager
    async def enter(
        self, owner_id: str | None, staging: Path, npm: str, npm_args: list[str]
    ) -> AsyncIterator[Jailed]:
        """The command that runs ``npm npm_args`` on ``staging`` in a jail, for the time of the
        ``async with``; on exit, the jail's processes are killed and ``staging`` is the
        server's again."""
        sandbox = self.sandbox
        registry = await self._registry(npm)
        uid = None
        if owner_id is not None and sandbox.is_root and self.uid_of is not None:
            uid = await self.uid_of(owner_id)
        jail = sandbox.install_jail(owner_id or "", uid)
        fds: list[int] = []
        proxy = EgressProxy(
            jail.egress_socket, f"npm:{owner_id or '-'}", _policy(sandbox, registry)
        )
        entered = False
        work = sandbox.install_dir()
        try:
            await asyncio.to_thread(_hand_over, staging, work, jail.uid)
            npm_path = Path(shutil.which(npm) or npm).absolute()  # noqa: ASYNC240 - no I/O
            # An npm outside /usr (a Node install in /opt, a test's stand-in): its package
            # directory, read-only, at its own path.
            outside = not str(npm_path.resolve()).startswith("/usr/")
            await proxy.__aenter__()
            entered = True
            if jail.uid is not None:
                os.chown(jail.egress_socket, jail.uid, jail.uid)
            seccomp_fd = sandbox.open_seccomp()
            if seccomp_fd is not None:
                fds.append(seccomp_fd)
            env = {
                "HOME": f"{INSTALL_DIR}/.home",
                "npm_config_cache": f"{INSTALL_DIR}/.npm-cache",
                "npm_config_registry": registry,
                "npm_config_update_notifier": "false",
                "npm_config_fund": "false",
                "npm_config_audit": "false",
            }
            launch = sandbox.install_command(
                jail,
                [str(npm_path.resolve() if outside else npm_path), *npm_args],
                work=work,
                env=env,
                ro_binds=[_package_root(npm_path)] if outside else [],
                seccomp_fd=seccomp_fd,
            )
            fds.extend(launch.fds)
            yield Jailed(launch.argv, tuple(fds))
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if entered:
                await proxy.__aexit__(None, None, None)
            sandbox.release(jail)
            await asyncio.to_thread(_take_back, work, staging)

    async def _registry(self, npm: str) -> str:
        if self.registry is None:
            self.registry = await _npm_registry(npm)
        return self.registry


def _policy(sandbox: Sandbox, registry: str) -> egress.EgressPolicy:
    """The registry's host and port, nothing else; reachable even when it is a private
    address (the operator chose it)."""
    parts = urlsplit(registry)
    host = parts.hostname or ""
    port = parts.port or (80 if parts.scheme == "http" else 443)
    shown = f"[{host}]" if ":" in host else host
    name = egress.parse_host(host)
    return sandbox.egress_policy.extended(
        [egress.parse_rule(f"{shown}:{port}", "npm registry")]
    ).only_to([(str(name), port)])


async def _npm_registry(npm: str) -> str:
    """npm's configured registry (its global and built-in settings, as installs see them)."""
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            npm,
            "config",
            "get",
            "registry",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", os.defpath), "HOME": "/nonexistent"},
        )
        out, _ = await proc.communicate()
        found = out.decode().strip()
        if proc.returncode == 0 and found.startswith(("http://", "https://")):
            return found
    return _DEFAULT_REGISTRY


def _package_root(npm_path: Path) -> Path:
    """The npm package directory holding ``npm_path`` (its executable), or its directory."""
    resolved = npm_path.resolve()
    for parent in resolved.parents:
        if (parent / "package.json").is_file() and (parent / "bin").is_dir():
            return parent
    return resolved.parent


def _hand_over(staging: Path, work: Path, uid: int | None) -> None:
    """A copy of ``staging``'s ``package.json`` in ``work``, the install uid's, private to it."""
    work.mkdir(mode=0o700)
    shutil.copyfile(staging / "package.json", work / "package.json")
    if uid is not None:
        _chown_tree(work, uid)


def _take_back(work: Path, staging: Path) -> None:
    """Every file of ``work`` the server's again, then moved into ``staging`` (copied when
    they are on different filesystems); ``work`` is removed."""
    try:
        if os.geteuid() == 0:
            _chown_tree(work, 0)
        for entry in work.iterdir():
            if entry.name not in SCRATCH and not (staging / entry.name).exists():
                shutil.move(entry, staging / entry.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _chown_tree(root: Path, uid: int) -> None:
    os.lchown(root, uid, uid)
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                os.lchown(os.path.join(dirpath, name), uid, uid)
