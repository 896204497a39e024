"""A shared, content-addressed store of installed npm dependency sets.

``root/<key>/`` holds ``package.json`` and ``node_modules/`` for one dependency set, where
``key`` is ``dependencies_key(dependencies)``. A set is installed once, into
``root/.tmp-<key>-<random>``, and renamed into place only when npm succeeded, so an entry that
exists is complete: a crash mid-install leaves at most a ``.tmp-`` directory, removed by the
next install of that key. Deployments use an entry through a ``node_modules`` symlink.

Per account (issue 25): ``root/.owners/<owner>/<key>`` marks each dependency set an account's
components use, holding the set's size in bytes (its files, measured once when installed,
kept in ``root/<key>/.sluice-size``). An account's npm bytes are the sum of its marks; an
install or a new mark that would take it past ``quota_bytes`` is refused with
``NpmQuotaExceeded`` (a jailed install cannot write more than the room left: ``npm_jail.py``;
an unjailed one that turns out too large is deleted, never renamed into the store), and one
account's installs run one at a time, so concurrent saves cannot add up past it.

Every install has a time limit (``install_timeout``), after which its process group is killed.
Inside it, a registry request that hears nothing for ``fetch_timeout`` seconds is abandoned and
retried by npm (``fetch_flags``): npm's own default waits 5 minutes, the whole install's time, so
one stalled connection to the registry failed the install (seen: a cold registry import in the
suite, ``timed out after 300 s``, the machine idle meanwhile). npm retries a request that got no
answer, not one whose body stopped coming (it fails with ``EIDLETIMEOUT``): an install that
fails with such a network error (``TRANSIENT_CODES``) is run again, up to ``INSTALL_ATTEMPTS``
times in all.
With a sandbox (``jail``, set by the platform), npm runs in a jail of its own: the account's
unprivileged uid, its own cgroups, no host files but its staging directory, no network but the
registry (``npm_jail.py``). Without one (``SLUICE_SANDBOX=off``) it runs as the server's user;
with a quota, in its own npm cache beside its directory, no file larger than the room left
(``RLIMIT_FSIZE``), and killed when the two directories pass that room (measured every
``WATCH_S``): so it writes at most the room plus what it writes in one interval.

Installs run with ``--ignore-scripts``: packages that build native code or download binaries
in ``install``/``postinstall`` (sharp, bcrypt, puppeteer, ssh2's optional cpu-features) are
installed without that step and may fail when loaded. ``@pipedream/platform`` and the
``@pipedream/*`` app packages declare no install scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
import shutil
import signal
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from sluice.domain.imports import DependencyPlan, dependencies_key
from sluice.errors import DependencyInstallFailed, NpmQuotaExceeded
from sluice.runtime import npm_jail
from sluice.runtime.npm_jail import Jailed, NpmJail
from sluice.runtime.sandbox import no_strays

__all__ = ["DependencyStore"]

log = logging.getLogger(__name__)

_NPM_FLAGS = (
    "install",
    "--no-audit",
    "--no-fund",
    "--no-package-lock",
    "--ignore-scripts",
    "--omit=dev",
    "--loglevel=error",
    "--no-update-notifier",
    "--no-progress",
)
# Host variables npm legitimately needs; everything else (tokens, cloud credentials, the
# host's HOME and its ~/.npmrc) stays out of the npm process.
_PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
#: How long npm waits on a silent registry request before it gives up on it and retries.
FETCH_TIMEOUT_S = 60.0
#: How many times it retries one (npm's default is 2).
FETCH_RETRIES = 3
#: npm's error codes for a connection that failed on the way: the install is run again.
TRANSIENT_CODES = frozenset(
    {
        "EIDLETIMEOUT",
        "ERESPONSETIMEOUT",
        "ETRANSFERTIMEOUT",
        "ECONNRESET",
        "ETIMEDOUT",
        "ESOCKETTIMEDOUT",
        "EAI_AGAIN",
        "EPIPE",
    }
)
#: Runs of one install at most, when the earlier ones failed with a ``TRANSIENT_CODES`` error.
INSTALL_ATTEMPTS = 3
_CODE_RE = re.compile(r"^npm (?:error|ERR!) code (E[A-Z_]+)\s*$", re.MULTILINE)
_STDERR_LINES = 8
#: How often an unjailed install's directories are measured against the account's room.
WATCH_S = 0.1
_E404_RE = re.compile(r"404 Not Found - GET \S+/(?P<name>[^/\s]+)(?:\s|$)")
_ETARGET_RE = re.compile(r"No matching version found for (?P<spec>\S+?)\.?(?:\s|$)")
_PREFIX_RE = re.compile(r"^npm (?:error|ERR!|warn|WARN)\s*")
_NOISE_RE = re.compile(
    r"A complete log of this run|^npm error 404\s*$|Note that you can also install from a"
    r"|tarball, folder, http url, or git url|^npm notice|^sluice-free-space "
)


class DependencyStore:
    """Installs dependency sets once per key and links them into component directories."""

    def __init__(
        self,
        root: Path,
        *,
        npm: str = "npm",
        install_timeout: float = 300.0,
        quota_bytes: int = 0,
        registry: str | None = None,
        cache_dir: Path | None = None,
        jail: NpmJail | None = None,
        fetch_timeout: float = FETCH_TIMEOUT_S,
    ) -> None:
        self.root = Path(root)
        self.fetch_timeout = fetch_timeout
        self.npm = npm
        self.install_timeout = install_timeout
        #: npm bytes one account's dependency sets may hold together (0: no quota).
        self.quota_bytes = quota_bytes
        self.registry = registry
        # npm's download cache, shared by every install; defaults to a directory inside root.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.root / ".npm-cache"
        # Same-process callers for one key wait here rather than on the file lock, which
        # would park a worker thread each.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        #: The jail installs run in; None runs npm as the server's user (no sandbox).
        self.jail = jail
        self._owner_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @property
    def fetch_flags(self) -> list[str]:
        """npm's flags for the registry's requests: each given up after ``fetch_timeout`` s of
        silence (no answer, or a body that stopped coming) and retried, the first retry after
        a quarter of that at most (npm's default: 10 s), the later ones backing off to it."""
        ms = max(1, round(self.fetch_timeout * 1000))
        return [
            f"--fetch-timeout={ms}",
            f"--fetch-retries={FETCH_RETRIES}",
            f"--fetch-retry-mintimeout={min(10_000, ms // 4)}",
            f"--fetch-retry-maxtimeout={ms}",
        ]

    def path_for(self, key: str) -> Path:
        return self.root / key

    async def ensure(
        self, plan: DependencyPlan | Mapping[str, str], owner_id: str | None = None
    ) -> Path | None:
        """The store directory holding ``plan``'s dependencies, installing them if needed.

        None when there is nothing to install. Raises ``DependencyInstallFailed``, and with
        ``owner_id`` (an account saving a component) ``NpmQuotaExceeded``. A mapping is
        installed as given: it should come from ``plan_dependencies``, which validates names and
        ranges (a ``file:`` or git value here would be honoured by npm).
        """
        dependencies = dict(plan.dependencies if isinstance(plan, DependencyPlan) else plan)
        if not dependencies:
            return None
        # Recomputed rather than trusting plan.key: the key names a directory, and an entry
        # must hold exactly the dependencies its name says (microseconds for a small dict).
        key = dependencies_key(dependencies)
        final = self.path_for(key)
        if owner_id is not None and self.quota_bytes > 0:
            lock = self._owner_locks.get(owner_id)
            if lock is None:
                lock = self._owner_locks[owner_id] = asyncio.Lock()
            async with lock:
                if not (self.root / ".owners" / _safe(owner_id) / key).is_file():
                    await self._check_quota(owner_id, key, final.is_dir() and final)
                found = await self._ensure(key, dependencies, final, owner_id)
                await asyncio.to_thread(self._mark, owner_id, key)
                return found
        return await self._ensure(key, dependencies, final, owner_id)

    async def owner_bytes(self, owner_id: str) -> int:
        """npm bytes of the dependency sets the account's components use (its marks)."""
        return await asyncio.to_thread(self._owner_bytes, owner_id)

    def _owner_bytes(self, owner_id: str) -> int:
        total = 0
        with contextlib.suppress(OSError):
            for mark in (self.root / ".owners" / _safe(owner_id)).iterdir():
                with contextlib.suppress(OSError, ValueError):
                    total += int(mark.read_text() or 0)
        return total

    async def _check_quota(self, owner_id: str, key: str, existing: Path | bool) -> None:
        """Before a set is installed (or marked, when it is in the store): refuse when the
        account is at its quota, or the existing set would take it past."""
        used = await self.owner_bytes(owner_id)
        size = await asyncio.to_thread(_entry_size, existing) if isinstance(existing, Path) else 0
        if used + size > self.quota_bytes or used >= self.quota_bytes:
            raise self._over(used, size)

    def _over(self, used: int, size: int) -> NpmQuotaExceeded:
        return NpmQuotaExceeded(
            f"these npm dependencies ({size} bytes) would take this account's share of the npm "
            f"store past its quota of {self.quota_bytes >> 20} MB (it holds {used} bytes): "
            "remove components that use large packages, or ask the operator to raise "
            "SLUICE_NPM_QUOTA_MB",
            details={"used_bytes": used, "size_bytes": size, "quota_bytes": self.quota_bytes},
        )

    def _full(self, limit: int, by_quota: bool, requested: list[str], stderr: str) -> Exception:
        """npm ran out of room: its jail's tmpfs (``npm_jail.py``), or (unjailed) the room
        left in the account's quota (``limit`` bytes)."""
        what = ", ".join(requested)
        mb = limit / (1 << 20)
        if by_quota:
            return NpmQuotaExceeded(
                f"installing {what} needs more than the {mb:.1f} MB left of this account's "
                f"npm quota ({self.quota_bytes >> 20} MB): nothing was kept. Remove components "
                "that use large packages, or ask the operator to raise SLUICE_NPM_QUOTA_MB",
                details={
                    "limit_bytes": limit,
                    "quota_bytes": self.quota_bytes,
                    "stderr": stderr[-2000:],
                },
            )
        return DependencyInstallFailed(
            f"installing {what} needs more than {mb:.0f} MB, the most one npm install may use "
            "(a third of SLUICE_RUNNER_MEMORY_MB: installs run on memory-backed tmpfs): "
            "nothing was kept",
            details={
                "packages": requested,
                "limit_bytes": limit,
                "stderr": stderr[-2000:],
            },
        )

    def _mark(self, owner_id: str, key: str) -> None:
        marks = self.root / ".owners" / _safe(owner_id)
        marks.mkdir(parents=True, exist_ok=True)
        mark = marks / key
        if not mark.is_file():
            mark.write_text(str(_entry_size(self.path_for(key))))

    async def _ensure(
        self, key: str, dependencies: dict[str, str], final: Path, owner_id: str | None
    ) -> Path:
        if final.is_dir():  # noqa: ASYNC240 - the hot path: a stat, no lock, no npm
            return final

        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            if final.is_dir():  # noqa: ASYNC240 - one stat
                return final
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
            lock_fd = await _flock(self.root / f"{key}.lock")
            try:
                if final.is_dir():  # another process installed it while we waited  # noqa: ASYNC240 - one stat
                    return final
                await self._install(key, dependencies, final, owner_id)
                return final
            finally:
                os.close(lock_fd)  # releases the flock

    async def link(self, store_dir: Path | None, component_dir: Path) -> None:
        """Point ``component_dir/node_modules`` at ``store_dir/node_modules``.

        Whatever ``node_modules`` was there before is replaced. With no ``store_dir`` a
        leftover symlink is removed, so a component no longer resolves packages it dropped.
        """
        await asyncio.to_thread(_link, store_dir, Path(component_dir))

    async def _install(
        self, key: str, dependencies: dict[str, str], final: Path, owner_id: str | None
    ) -> None:
        # We hold the key's lock: any .tmp- directory of this key is a crashed install.
        for stale in self.root.glob(f".tmp-{key}-*"):
            await asyncio.to_thread(shutil.rmtree, stale, True)
        tmp = self.root / f".tmp-{key}-{secrets.token_hex(6)}"
        try:
            room = None
            if owner_id is not None and self.quota_bytes > 0:
                room = self.quota_bytes - await self.owner_bytes(owner_id)
            for attempt in range(1, INSTALL_ATTEMPTS + 1):
                await asyncio.to_thread(shutil.rmtree, tmp, True)  # an earlier attempt's
                await asyncio.to_thread(_write_package_json, tmp, key, dependencies)
                try:
                    await self._run_npm(tmp, dependencies, owner_id, room)
                    break
                except DependencyInstallFailed as exc:
                    code = _transient_code(exc)
                    if code is None or attempt == INSTALL_ATTEMPTS:
                        raise
                    log.warning(
                        "npm install of %s failed with %s (a network error): run again (%d of %d)",
                        ", ".join(sorted(dependencies)),
                        code,
                        attempt + 1,
                        INSTALL_ATTEMPTS,
                    )
            missing = [
                name
                for name in dependencies
                if not (tmp / "node_modules" / name / "package.json").is_file()
            ]
            if missing:
                raise DependencyInstallFailed(
                    f"npm finished but did not install {', '.join(sorted(missing))}",
                    details={"packages": sorted(missing)},
                )
            size = await asyncio.to_thread(_tree_size, tmp)
            if owner_id is not None and self.quota_bytes > 0:
                used = await self.owner_bytes(owner_id)
                if used + size > self.quota_bytes:
                    raise self._over(used, size)  # the finally below deletes the install
            await asyncio.to_thread((tmp / ".sluice-size").write_text, str(size))
            await asyncio.to_thread(os.rename, tmp, final)
        finally:
            if tmp.exists():
                await asyncio.to_thread(shutil.rmtree, tmp, True)

    def npm_env(self) -> dict[str, str]:
        """The environment npm runs with (its cache and registry), for other npm commands."""
        return self._npm_env()

    def _npm_env(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
        env.setdefault("PATH", os.defpath)
        env.update(
            HOME=str(self.cache_dir / "home"),
            npm_config_cache=str(self.cache_dir),
            npm_config_update_notifier="false",
            npm_config_fund="false",
            npm_config_audit="false",
        )
        if self.registry:
            env["npm_config_registry"] = self.registry
        return env

    async def _run_npm(
        self, cwd: Path, dependencies: Mapping[str, str], owner_id: str | None, room: int | None
    ) -> None:
        """npm install in ``cwd``; ``room``: bytes left in the account's npm quota (a jailed
        install cannot use more, nor write anything to the host's disk while it runs)."""
        if self.jail is None:
            if room is None:
                await self._run_npm_in(
                    dependencies, [self.npm, *_NPM_FLAGS, *self.fetch_flags], None, cwd
                )
                return
            # SLUICE_SANDBOX=off: bounded by watching (module docstring). Its cache is its own
            # (counted, then deleted): a shared one would grow past every quota.
            cache = cwd.parent / f"{cwd.name}-cache"
            room = max(room, 4096)
            argv = [self.npm, *_NPM_FLAGS, *self.fetch_flags]
            if shutil.which("prlimit") is not None:  # util-linux: Linux only
                argv = ["prlimit", f"--fsize={room}", "--", *argv]
            try:
                await self._run_npm_in(dependencies, argv, None, cwd, _Room(room, (cwd, cache)))
            finally:
                await asyncio.to_thread(shutil.rmtree, cache, True)
            return
        flags = [*_NPM_FLAGS, *self.fetch_flags]
        async with self.jail.enter(owner_id, cwd, self.npm, flags, room) as jailed:
            # uvloop ignores close_fds: none of the server's descriptors may reach the jail.
            keep: set[int | None] = set(jailed.pass_fds)
            no_strays(keep)
            await self._run_npm_in(dependencies, jailed.argv, jailed, None)

    async def _run_npm_in(
        self,
        dependencies: Mapping[str, str],
        argv: list[str],
        jailed: Jailed | None,
        host_cwd: Path | None,
        room: _Room | None = None,
    ) -> None:
        """Run ``argv`` (npm, or the jail that runs it: ``host_cwd`` None, an empty
        environment, ``/`` as cwd) and turn its failure into ``DependencyInstallFailed``
        (``NpmQuotaExceeded`` when it ran out of room: its jail's, or ``room``)."""
        requested = [_describe(name, value) for name, value in sorted(dependencies.items())]
        env = self._npm_env() if host_cwd is not None else {}
        if room is not None:
            env["npm_config_cache"] = str(room.dirs[1])
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=host_cwd or "/",
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=jailed.pass_fds if jailed else (),
                start_new_session=True,  # its own process group, so a kill reaches children
            )
        except OSError as exc:
            raise DependencyInstallFailed(
                f"Could not run npm ({self.npm!r}) to install {', '.join(requested)}: {exc}",
                details={"packages": requested},
            ) from exc
        watch = None if room is None else asyncio.create_task(_watch(proc, room))
        try:
            _, stderr_bytes = await asyncio.wait_for(proc.communicate(), self.install_timeout)
        except TimeoutError:
            await _kill(proc)
            raise DependencyInstallFailed(
                f"npm install of {', '.join(requested)} timed out after {self.install_timeout:g} s",
                details={"packages": requested},
            ) from None
        except BaseException:  # cancelled: do not leave npm running
            await _kill(proc)
            raise
        finally:
            if watch is not None:
                watch.cancel()
        if proc.returncode != 0:
            stderr = stderr_bytes.decode(errors="replace")
            if jailed is not None and npm_jail.full(jailed, stderr):
                raise self._full(jailed.limit_bytes, jailed.by_quota, requested, stderr)
            if room is not None and await asyncio.to_thread(room.full, proc.returncode, stderr):
                raise self._full(room.bytes, True, requested, stderr)
            culprits = _culprits(stderr) or requested
            lines = _useful_lines(stderr)
            message = f"npm could not install {', '.join(culprits)}"
            if lines:
                message += ": " + "; ".join(lines)
            raise DependencyInstallFailed(
                message,
                details={
                    "packages": culprits,
                    "exit_code": proc.returncode,
                    "stderr": stderr[-4000:],
                },
            )


def _transient_code(exc: DependencyInstallFailed) -> str | None:
    """The ``TRANSIENT_CODES`` error npm's output names, if it names one."""
    stderr = exc.details.get("stderr")
    if not isinstance(stderr, str):
        return None
    codes = set(_CODE_RE.findall(stderr)) & TRANSIENT_CODES
    return min(codes) if codes else None


@dataclass(frozen=True)
class _Room:
    """An unjailed install's bound: ``bytes`` left in the account's npm quota, for the files
    under ``dirs`` (its directory, its npm cache)."""

    bytes: int
    dirs: tuple[Path, ...]

    def used(self) -> int:
        return sum(_tree_size(d) for d in self.dirs)

    def full(self, returncode: int | None, stderr: str) -> bool:
        """Whether a failed install ran out of this room: killed for it (``_watch``), a file
        at ``RLIMIT_FSIZE`` (``SIGXFSZ``, ``EFBIG``), or (nearly) all of it used."""
        if returncode == -signal.SIGXFSZ or "EFBIG" in stderr or "ENOSPC" in stderr:
            return True
        return self.used() >= self.bytes - max(4096, self.bytes // 20)


async def _watch(proc: asyncio.subprocess.Process, room: _Room) -> None:
    """Kill ``proc``'s process group once what it wrote passes ``room`` (until cancelled)."""
    while proc.returncode is None:
        if await asyncio.to_thread(room.used) > room.bytes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        await asyncio.sleep(WATCH_S)


async def _flock(path: Path) -> int:
    """Open ``path`` and take an exclusive flock on it in a worker thread; return the fd."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    acquired = asyncio.get_running_loop().run_in_executor(None, fcntl.flock, fd, fcntl.LOCK_EX)
    try:
        await asyncio.shield(acquired)
    except BaseException:
        # Cancelled while the thread still waits: close (and so release) once it gets the lock.
        acquired.add_done_callback(lambda _: os.close(fd))
        raise
    return fd


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def _write_package_json(directory: Path, key: str, dependencies: Mapping[str, str]) -> None:
    directory.mkdir(parents=True)
    manifest = {
        "name": f"sluice-deps-{key[:16]}",
        "version": "0.0.0",
        "private": True,
        "dependencies": dict(dependencies),
    }
    (directory / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _link(store_dir: Path | None, component_dir: Path) -> None:
    link = component_dir / "node_modules"
    if store_dir is None:
        if link.is_symlink():
            link.unlink()
        return
    component_dir.mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    # Build the link beside the target and rename it over: readers never see no node_modules.
    tmp = component_dir / f".node_modules-{secrets.token_hex(6)}"
    tmp.symlink_to(store_dir.resolve() / "node_modules", target_is_directory=True)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _describe(name: str, value: str) -> str:
    if value.startswith("npm:"):
        return value[4:]
    return f"{name}@{value}"


def _culprits(stderr: str) -> list[str]:
    found: list[str] = []
    for m in _E404_RE.finditer(stderr):
        found.append(unquote(m.group("name")))
    for m in _ETARGET_RE.finditer(stderr):
        found.append(m.group("spec"))
    return list(dict.fromkeys(found))


def _useful_lines(stderr: str) -> list[str]:
    useful: list[str] = []
    for raw in stderr.splitlines():
        line = _PREFIX_RE.sub("", raw.strip()).strip()
        if line and not _NOISE_RE.search(raw.strip()):
            useful.append(line[:300])
    return useful[:_STDERR_LINES]


def _safe(owner_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", owner_id)[:80] or "_"


def _tree_size(root: Path) -> int:
    """Bytes of the files under ``root`` (links not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _entry_size(entry: Path) -> int:
    """A store entry's size: written at install, measured (and kept) for older entries."""
    kept = entry / ".sluice-size"
    with contextlib.suppress(OSError, ValueError):
        return int(kept.read_text())
    size = _tree_size(entry)
    with contextlib.suppress(OSError):
        kept.write_text(str(size))
    return size
