"""The jail an ``npm install`` of user dependencies runs in (issue 25).

npm ran as the server's user (root, in most deployments) on the host: whatever code ran in
the install process (a package's install script, were scripts ever enabled; an exploit of
npm's tarball handling) could read the data directory and write anywhere. Now each install
runs like a runner (``sandbox.py``), in a jail of its own:

- bubblewrap with every namespace unshared, no capabilities, the runners' seccomp filter;
  ``/usr`` and a few files of ``/etc`` read-only, a sized ``/tmp``, the rest of ``/``
  read-only; nothing of the host writable: npm works in a tmpfs at ``/install`` (its cwd,
  holding a copy of the set's ``package.json``) with its cache in another at ``/npm-cache``,
  each of ``limit`` bytes (the account's room left in its npm quota, at most a third of the
  install's memory: tmpfs pages are memory), so an install fills no host disk and a set that
  does not fit fails with ``ENOSPC`` (``NpmQuotaExceeded`` or ``DependencyInstallFailed``,
  ``deps.py``);
- as root, under the account's jail uid (the one its runners use; a uid of this process for
  installs no account asked for) and in a memory and pids cgroup of its own;
- no network but its own ``lo``: ``js/npm-egress.mjs`` forwards npm's proxy connections to an
  egress proxy (``egress.py``) that lets through the npm registry's host and port only.

When npm succeeds, the jail writes ``node_modules`` to its stdout as a tar stream, and the
server unpacks it into the store's staging directory (``_unpack``): the server never walks a
directory the jail can still change, every member is checked as ``tarfile``'s ``data``
filter does (no absolute paths, no ``..``, no links out of the tree, no devices), every file
is the server's, and the stream may not be larger than the two tmpfs mounts could hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
import shutil
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sluice.domain import egress
from sluice.errors import DependencyInstallFailed
from sluice.runtime.egress import EgressProxy
from sluice.runtime.sandbox import FREE_MARK, INSTALL_CACHE, Sandbox

__all__ = ["Jailed", "NpmJail"]

_DEFAULT_REGISTRY = "https://registry.npmjs.org/"

UidOf = Callable[[str], Awaitable[int | None]]


@dataclass(frozen=True)
class Jailed:
    """How to start npm in one install's jail: ``argv`` (the npm arguments go last) and the
    descriptors to pass on (``pass_fds``: the tar stream's pipe among them); run it with
    ``cwd="/"``, an empty environment and no stdout. ``limit_bytes``: the size of each of its tmpfs
    mounts; ``by_quota``: whether that is the account's room left in its npm quota (else the
    most any install may use)."""

    argv: list[str]
    pass_fds: tuple[int, ...]
    limit_bytes: int
    by_quota: bool


class NpmJail:
    """Builds one jail per install. ``registry``: the registry npm uses (None: npm's own
    setting, asked once)."""

    def __init__(
        self, sandbox: Sandbox, *, uid_of: UidOf | None = None, registry: str | None = None
    ) -> None:
        self.sandbox = sandbox
        self.uid_of = uid_of
        self.registry = registry

    def limit(self, room: int | None) -> tuple[int, bool]:
        """The size of an install's tmpfs mounts, and whether the quota (``room``: bytes left
        in the account's npm quota, None without one) set it: at most a third of the
        install's memory limit, since tmpfs pages are memory its cgroup is charged for."""
        most = (self.sandbox.config.memory_mb << 20) // 3
        if room is not None and room < most:
            return max(room, 4096), True
        return most, False

    @contextlib.asynccontextmanager
    async def enter(
        self,
        owner_id: str | None,
        staging: Path,
        npm: str,
        npm_args: list[str],
        room: int | None = None,
        *,
        keep: str = "node_modules",
    ) -> AsyncIterator[Jailed]:
        """The command that runs ``npm npm_args`` in a jail, for the time of the ``async
        with``: on ``staging``'s ``package.json`` (an install, ``keep`` ``node_modules``) or on
        nothing (``keep`` ``.``: ``npm pack``, whose tarball is what it leaves). What it
        leaves at ``keep`` is unpacked into ``staging`` as it comes; on a clean exit from the
        block, a stream that could not be unpacked raises ``DependencyInstallFailed``. On exit,
        the jail's processes are killed."""
        sandbox = self.sandbox
        registry = await self._registry(npm)
        uid = None
        if owner_id is not None and sandbox.is_root and self.uid_of is not None:
            uid = await self.uid_of(owner_id)
        jail = sandbox.install_jail(owner_id or "", uid)
        limit, by_quota = self.limit(room)
        fds: list[int] = []
        proxy = EgressProxy(
            jail.egress_socket, f"npm:{owner_id or '-'}", _policy(sandbox, registry)
        )
        entered = False
        read_end, write_end = os.pipe()
        unpacking = asyncio.ensure_future(
            asyncio.to_thread(_unpack, read_end, staging, 2 * limit + (1 << 20))
        )
        try:
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
                "HOME": "/tmp",  # noqa: S108 - the jail's own sized tmpfs
                "npm_config_cache": INSTALL_CACHE,
                "npm_config_registry": registry,
                "npm_config_update_notifier": "false",
                "npm_config_fund": "false",
                "npm_config_audit": "false",
            }
            launch = sandbox.install_command(
                jail,
                [str(npm_path.resolve() if outside else npm_path), *npm_args],
                package_json=staging / "package.json" if keep == "node_modules" else None,
                keep=keep,
                out_fd=write_end,
                size_bytes=limit,
                env=env,
                ro_binds=[_package_root(npm_path)] if outside else [],
                seccomp_fd=seccomp_fd,
            )
            fds.extend(launch.fds)
            yield Jailed(launch.argv, (*fds, write_end), limit, by_quota)
        finally:
            os.close(write_end)  # the jail holds the only other copies: gone when it is
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if entered:
                await proxy.__aexit__(None, None, None)
            sandbox.release(jail)  # kills what is left in its cgroups: the pipe closes
            failure = await asyncio.gather(unpacking, return_exceptions=True)
        if isinstance(failure[0], BaseException):
            raise DependencyInstallFailed(
                f"the installed packages could not be unpacked: {failure[0]}"
            ) from failure[0]

    async def _registry(self, npm: str) -> str:
        if self.registry is None:
            self.registry = await _npm_registry(npm)
        return self.registry


def full(jailed: Jailed, stderr: str) -> bool:
    """Whether a failed install ran out of room: npm said ENOSPC, or one of its tmpfs mounts
    was (nearly) full when it failed (the jail says how much was left, ``FREE_MARK``)."""
    if "ENOSPC" in stderr:
        return True
    near = max(1 << 20, jailed.limit_bytes // 20)
    for line in stderr.splitlines():
        parts = line.split()
        numbers = len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit()
        if numbers and parts[0] == FREE_MARK and int(parts[1]) * int(parts[2]) < near:
            return True
    return False


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


class _Capped(io.RawIOBase):
    """A pipe's read end that fails past ``cap`` bytes."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.left = fd, cap

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = os.readv(self.fd, [buffer])
        self.left -= n
        if self.left < 0:
            raise OSError(errno.EFBIG, "the install's tar stream is larger than its tmpfs")
        return n


def _unpack(read_end: int, staging: Path, cap: int) -> None:
    """Unpack the tar stream on ``read_end`` into ``staging`` (every file the server's, each
    member checked as ``tarfile.data_filter`` does); reads to the end in any case, so the jail
    never blocks on a full pipe."""

    def ours(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        checked = tarfile.data_filter(member, dest)
        if checked is None:
            return None
        return checked.replace(uid=os.geteuid(), gid=os.getegid(), uname="", gname="")

    stream = io.BufferedReader(_Capped(read_end, cap), 1 << 16)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            archive.extractall(staging, filter=ours)  # noqa: S202 - every member checked
    except tarfile.ReadError as exc:
        if str(exc) != "empty file":  # npm failed: nothing was sent
            raise
    finally:
        with contextlib.suppress(OSError):
            while os.read(read_end, 1 << 16):
                pass
        os.close(read_end)
