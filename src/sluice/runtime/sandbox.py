"""The jail each account's Node runner lives in (docs/runtime.md, "The sandbox").

A runner is started through bubblewrap with every namespace unshared (mount, PID, network,
IPC, UTS, user, cgroup), no capabilities, ``no_new_privs``, a new session and an empty
environment. Its filesystem holds only:

- ``/usr`` (Node and the system libraries) and a few files of ``/etc``, read-only;
- Sluice's runtime JS, read-only, copied onto a tmpfs at ``/sluice/runtime``;
- that account's *view*: the component trees and npm dependency sets its invocations have
  used, read-only, at ``/sluice/components`` and ``/sluice/npm`` (the pool sends entry paths
  as the jail sees them, ``jail_path``; a view's ``node_modules`` links name ``/sluice/npm``),
  so no path of the host's checkout or data directory is in the jail;
- a private, size-limited ``/tmp`` and ``/dev/shm`` (``SLUICE_SANDBOX_TMP_MB`` each); the rest
  of ``/`` and ``/dev`` is read-only, so no tmpfs of the jail grows without a bound.

Nothing of the data directory is there (no ``secret.key``, no database, no other account's
files); ``/proc`` is the jail's own PID namespace. The view is a directory of hard links
(copies across filesystems) that grows while the runner lives: a bind mount shows entries
added after the jail started, so a new deployment needs no restart. As root, the view is bound
from an overlay mount of it and the egress sockets are on a tmpfs of their own (``_Mounts``),
so that no bind in the jail's mountinfo shows a host path as its source (``hides_sources``).

As root, each runner also runs under its account's own unprivileged uid (``uid_base`` + a
hash of the account, stored with the account so it is one uid in every process) and in its own
cgroup (memory for the whole process, heap and off-heap, and a process count). Without
cgroups the runner's RSS is watched instead (``runner.py``). ``SandboxConfig(enabled=False)``
(``SLUICE_SANDBOX=off``) runs Node directly, for development on systems without namespaces.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import hashlib
import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sluice import errors
from sluice.domain import egress
from sluice.runtime import cgroups, seccomp, watchdog

log = logging.getLogger(__name__)

JS_DIR = Path(__file__).parent / "js"
INSTALL_HINT = (
    "the sandbox needs bubblewrap: install it (Debian/Ubuntu: apt-get install bubblewrap) "
    "or set SLUICE_SANDBOX=off to run user code unsandboxed (development only)"
)
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
# /etc entries Node may read: CA bundles for TLS, the time zone. Nothing with secrets.
#: The jail's own tmpfs (private to the jail, never the host's /tmp).
_JAIL_TMP = "/tmp"  # noqa: S108
_JAIL_SHM = "/dev/shm"  # noqa: S108
_ETC = ("ssl/certs", "ca-certificates", "localtime", "nsswitch.conf")


@dataclass(frozen=True)
class SandboxConfig:
    enabled: bool = True
    bwrap: str = "bwrap"
    node: str = "node"
    components_dir: Path = Path("/nonexistent/components")
    npm_store_dir: Path = Path("/nonexistent/npm-store")
    #: Memory of the whole runner process (heap, buffers, children), MB.
    memory_mb: int = 1024
    #: Processes and threads in the runner's jail (Node itself uses about 12 + 1 a worker).
    max_processes: int = 256
    #: Size of the jail's private /tmp, MB.
    tmp_mb: int = 64
    #: As root, runners run as ``uid_base + n`` (n < 2**24), one uid per live account.
    uid_base: int = 1_000_000_000
    #: ``SLUICE_EGRESS_ALLOW``: where user code may connect besides the public internet.
    egress_allow: str = ""


#: Where the account's egress proxy socket appears inside the jail.
EGRESS_SOCKET = "/run/sluice/egress.sock"
#: Where Sluice's runtime JS, the account's components and its npm sets appear in a jail:
#: neutral paths, never the host's (its checkout, its data directory).
JAIL_RUNTIME = "/sluice/runtime"
JAIL_COMPONENTS = "/sluice/components"
JAIL_NPM = "/sluice/npm"
#: An npm install's working directory and npm's cache in its jail (``npm_jail.py``): tmpfs
#: mounts of a size each, so an install fills no host disk and at most that much memory.
INSTALL_DIR = "/install"
INSTALL_CACHE = "/npm-cache"
#: What a failed install's jail prints before the free blocks and block size of each tmpfs.
FREE_MARK = "sluice-free-space"
#: As root: MS_RDONLY for an account's overlay, MNT_DETACH to unmount (``_Mounts``).
_MS_RDONLY = 1
_MNT_DETACH = 2
#: The size of the tmpfs holding the egress sockets (as root): sockets take no pages.
_EGRESS_TMPFS = b"size=64k,mode=0711"


@dataclass(frozen=True)
class Launch:
    """A jail's start: ``argv``, and descriptors to pass on (``pass_fds``) and then close."""

    argv: list[str]
    fds: tuple[int, ...]

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class Jail:
    """One account's place in the sandbox: its view, its uid and its cgroups."""

    owner_id: str
    view: Path
    uid: int | None
    #: The host path of this jail's egress proxy socket (bound at ``EGRESS_SOCKET``).
    egress_socket: Path
    #: Where the jail's bubblewrap binds the view from: the view, or (``hides_sources``) the
    #: account's overlay of it.
    view_source: Path | None = None
    cgroups: list[Path] = field(default_factory=list)
    staged: set[str] = field(default_factory=set)

    def oom_killed(self) -> bool:
        """Whether the kernel killed something in this jail for exceeding its memory."""
        return cgroups.oom_killed(self.cgroups)


class Sandbox:
    """Builds each account's jail and the command line that starts its runner inside it.

    ``open()`` checks the tool and prepares a private staging directory; ``close()`` removes it
    and the cgroups. Blocking file work (staging a view) runs in a thread at the caller's
    choice: the methods here are synchronous.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.root: Path | None = None
        self.is_root = os.geteuid() == 0
        self._cgroups = cgroups.Controllers(
            memory_mb=config.memory_mb, max_processes=config.max_processes
        )
        self._uids: dict[int, str] = {}
        self._sockets = 0
        #: Parsed once: a bad ``SLUICE_EGRESS_ALLOW`` stops Sluice at start.
        self.egress_policy = egress.EgressPolicy.parse(config.egress_allow)
        self._node = shutil.which(config.node) or config.node
        #: The compiled seccomp filter, when libseccomp could build it.
        self.seccomp_path: Path | None = None
        self._bwrap = shutil.which(config.bwrap) or config.bwrap
        #: Host path prefixes and where they are in a jail (``jail_path``, ``host_text``).
        self._to_jail = [
            (f"{JS_DIR.resolve()}/", f"{JAIL_RUNTIME}/"),
            (f"{JS_DIR}/", f"{JAIL_RUNTIME}/"),
            (f"{config.components_dir}/", f"{JAIL_COMPONENTS}/"),
            (f"{config.npm_store_dir}/", f"{JAIL_NPM}/"),
            (f"{config.npm_store_dir.resolve()}/", f"{JAIL_NPM}/"),
        ]
        self._to_host = [
            (f"{JAIL_RUNTIME}/", f"{JS_DIR.resolve()}/"),
            (f"{JAIL_COMPONENTS}/", f"{config.components_dir}/"),
            (f"{JAIL_NPM}/", f"{config.npm_store_dir}/"),
        ]
        #: Whether views are overlay mounts and egress sockets on a tmpfs of their own (as
        #: root, where mounts can be made: checked at ``open``), so that no bind's source in
        #: a jail's mountinfo is a host path.
        self.hides_sources = False
        self._host_mounts: _Mounts | None = None
        #: The runtime's files (names), and the size of the tmpfs holding them in a jail.
        self._runtime_files: list[str] = []
        self._runtime_bytes = 0

    # ---- lifecycle -----------------------------------------------------------------------

    def open(self) -> None:
        if not self.config.enabled:
            log.warning(
                "SLUICE_SANDBOX=off: user code runs UNSANDBOXED with this server's rights "
                "(development only: any account can read every secret)",
                extra={"action": "sandbox_off"},
            )
            return
        if shutil.which(self.config.bwrap) is None:
            raise errors.SandboxUnavailable(INSTALL_HINT)
        prefix = "sluice-sandbox-"
        if self.is_root:
            _sweep(Path(tempfile.gettempdir()))
            # Named for its process: a dead process's mounts are found and removed (``_sweep``).
            # Only as root: otherwise the views are plain binds, and their sources would show
            # the server's pid in a jail's mountinfo.
            prefix += f"{os.getpid()}-"
        root = Path(tempfile.mkdtemp(prefix=prefix))
        # Traversable, not listable: each account's view below is reachable by its uid only.
        root.chmod(0o711)
        self.root = root
        runtime = root / "runtime"
        shutil.copytree(JS_DIR, runtime, ignore=shutil.ignore_patterns("node_modules"))
        for path in [runtime, *runtime.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        self._runtime_files = sorted(p.name for p in runtime.iterdir() if p.is_file())
        # A page per file at least, and room for the directory itself.
        pages = sum(-(-(runtime / n).stat().st_size // 4096) for n in self._runtime_files)
        self._runtime_bytes = (pages + 16) * 4096
        (root / "accounts").mkdir(mode=0o711)
        (root / "egress").mkdir(mode=0o711)
        if self.is_root:
            self._host_mounts = _Mounts.open(root)
            self.hides_sources = self._host_mounts is not None
        try:
            seccomp.build(root / "seccomp.bpf")
            self.seccomp_path = root / "seccomp.bpf"
        except errors.SeccompUnavailable as exc:
            log.warning("runners start without a seccomp filter: %s", exc)
        if self.is_root:
            # One parent per sandbox (a process may hold several: tests open platforms side
            # by side), named for its process so that a dead process's are found and removed.
            self._cgroups.open(f"sluice-{os.getpid()}-{secrets.token_hex(3)}")
        self._probe()

    def close(self) -> None:
        self._cgroups.close()
        if self._host_mounts is not None:
            self._host_mounts.close()
            self._host_mounts = None
            self.hides_sources = False
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _probe(self) -> None:
        """Start a trivial jail once, so a host without user namespaces fails at startup with
        a clear message, not at the first invocation. As root, first with the view as an
        overlay mount: where that fails, views are plain binds (a second jail, the only one
        the probe starts again)."""
        failed = self._try_jail()
        if failed is not None and self.hides_sources:
            log.warning(
                "the jails' mountinfo shows the sandbox's directory: a jail with its view as "
                "an overlay mount did not start",
                extra={"action": "sandbox_no_overlay"},
            )
            self.hides_sources = False
            failed = self._try_jail()
        if failed is not None:
            raise errors.SandboxUnavailable(
                f"bubblewrap could not start a sandbox ({failed[:300]}); "
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1), "
                "or set SLUICE_SANDBOX=off for development"
            )
        if not self.has_cgroups:
            self._probe_watchdog()

    def _try_jail(self) -> str | None:
        """Start ``node -e 0`` in a jail: None if it ran, else what it said."""
        jail = self.jail("probe")
        filter_fd = self.open_seccomp()
        launch = self.command(jail, [self._node, "-e", "0"], seccomp_fd=filter_fd)
        fds = launch.fds if filter_fd is None else (*launch.fds, filter_fd)
        try:
            done = subprocess.run(
                launch.argv,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
                cwd="/",
                env={},
                pass_fds=fds,
            )
        finally:
            launch.close()
            if filter_fd is not None:
                os.close(filter_fd)
            self.release(jail)
        return None if done.returncode == 0 else done.stderr.strip() or f"{done.returncode}"

    def _probe_watchdog(self) -> None:
        """Without cgroups, a runner's memory is bounded only by the watchdog, which must see
        the jail's tmpfs mounts (their pages are memory no RSS shows): refuse to start runners
        when it cannot (issue 25)."""
        jail = self.jail("probe-watchdog")
        filter_fd = self.open_seccomp()
        launch = self.command(
            jail, [self._node, "-e", "setTimeout(() => {}, 10000)"], seccomp_fd=filter_fd
        )
        proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            pass_fds=launch.fds if filter_fd is None else (*launch.fds, filter_fd),
            start_new_session=True,
        )
        seen: int | None = None
        try:
            for _ in range(200):  # up to 10 s for the jail to be up
                jailed = watchdog.inside(watchdog.tree(proc.pid))
                if jailed is not None:
                    try:
                        seen = watchdog.tmpfs_used(jailed)
                        break
                    except PermissionError:
                        break  # the kernel refuses the look: asking again will not help
                    except OSError:
                        pass  # the process moved on or is gone: look again
                if proc.poll() is not None:
                    break
                time.sleep(0.05)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            launch.close()
            if filter_fd is not None:
                os.close(filter_fd)
            self.release(jail)
        if seen is None:
            raise errors.SandboxUnavailable(
                "no cgroup limits the runners' memory and the watchdog cannot see a jail's "
                "tmpfs mounts (/proc/<pid>/root): runners are not started. Run Sluice as root "
                "with cgroups writable, or on a host where /proc shows a jail's mounts"
            )

    # ---- jails ---------------------------------------------------------------------------

    def jail(self, owner_id: str, uid: int | None = None) -> Jail:
        """A jail for ``owner_id``'s next runner: its view directory, uid and cgroups.
        ``uid``: the account's own, as stored with it; else (an owner that is no account) one
        distinct among this process's live jails."""
        assert self.root is not None, "the sandbox is not open"
        name = _SAFE.sub("_", owner_id)[:80] or "_"
        view = self.root / "accounts" / name
        if not self.is_root:
            uid = None
        elif uid is None:
            uid = self._allocate_uid(owner_id)
        else:
            self._uids[uid] = owner_id
        if not view.exists():
            (view / "components").mkdir(parents=True)
            (view / "npm").mkdir()
            if uid is not None:
                os.chown(view, uid, uid)
            view.chmod(0o700)
        # Short names: a Unix socket path has at most 107 bytes.
        self._sockets += 1
        jail = Jail(owner_id, view, uid, self.root / "egress" / f"{self._sockets}.sock")
        jail.view_source = view
        if self.hides_sources and self._host_mounts is not None:
            try:
                jail.view_source = self._host_mounts.view(view)
            except OSError as exc:  # the jail still starts, its view a plain bind
                log.warning(
                    "views are plain binds from now on: a jail's mountinfo shows the sandbox's "
                    "directory (the overlay of %s's view could not be mounted: %s)",
                    owner_id,
                    exc,
                    extra={"action": "sandbox_no_overlay"},
                )
                self.hides_sources = False
        staged = view / "components"
        jail.staged = {p.name for p in staged.iterdir()} if staged.exists() else set()
        jail.cgroups = self._cgroups.make(name)
        return jail

    def release(self, jail: Jail) -> None:
        """Forget the jail's uid and cgroups (its runner has exited). The view is kept for the
        account's next runner."""
        with contextlib.suppress(OSError):
            jail.egress_socket.unlink()
        if jail.view_source not in (None, jail.view) and self._host_mounts is not None:
            self._host_mounts.release(jail.view)
        jail.view_source = None
        if jail.uid is not None and self._uids.get(jail.uid) == jail.owner_id:
            del self._uids[jail.uid]
        for cg in jail.cgroups:
            cgroups.kill_all(cg)  # whatever outlived the runner (a cgroup with a process stays)
            with contextlib.suppress(OSError):
                cg.rmdir()

    def install_jail(self, owner_id: str, uid: int | None) -> Jail:
        """A jail for one npm install (``npm_jail.py``): the account's uid (``uid``, as stored
        with it; else one of this process), cgroups of its own, an egress socket; no view."""
        assert self.root is not None, "the sandbox is not open"
        owner = f"npm:{owner_id}"
        if not self.is_root:
            uid = None
        elif uid is None:
            uid = self._allocate_uid(owner)
        self._sockets += 1
        jail = Jail(
            owner, self.root / "no-view", uid, self.root / "egress" / f"{self._sockets}.sock"
        )
        jail.cgroups = self._cgroups.make(f"npm-{secrets.token_hex(4)}")
        return jail

    def install_command(
        self,
        jail: Jail,
        argv: list[str],
        *,
        package_json: Path | None,
        keep: str,
        out_fd: int,
        size_bytes: int,
        env: dict[str, str],
        ro_binds: list[Path],
        seccomp_fd: int | None,
    ) -> Launch:
        """How to run ``argv`` (npm and its arguments) in an install's ``jail``, through
        ``js/npm-egress.mjs`` (its only way out: the jail's egress socket). Its working
        directory (``INSTALL_DIR``, holding a copy of ``package_json`` if given) and npm's cache
        (``INSTALL_CACHE``) are tmpfs mounts of ``size_bytes`` each; nothing of the host is
        writable. When ``argv`` succeeds, ``keep`` (a path in ``INSTALL_DIR``: ``node_modules``
        for an install, ``.`` for ``npm pack``'s tarball) is written to ``out_fd`` (a pipe the
        caller passes on) as a tar stream (``npm_jail.py`` unpacks it), and ``argv``'s own
        stdout goes to stderr; when it fails, each tmpfs's free space follows on stderr
        (``FREE_MARK``)."""
        assert self.root is not None
        bw = self._namespaces()
        for name, value in env.items():
            bw += ["--setenv", name, value]
        bw += self._system()
        for path in ro_binds:
            bw += ["--ro-bind", str(path), str(path)]
        runtime, fds = self._runtime()
        size = str(size_bytes)
        bw += [*runtime, "--size", size, "--tmpfs", INSTALL_DIR]
        bw += ["--size", size, "--tmpfs", INSTALL_CACHE]
        if package_json is not None:
            manifest = os.open(package_json, os.O_RDONLY | os.O_CLOEXEC)
            fds = (*fds, manifest)
            bw += ["--file", str(manifest), f"{INSTALL_DIR}/package.json"]
        bw += [
            "--ro-bind-try",
            str(jail.egress_socket),
            EGRESS_SOCKET,
            "--chdir",
            INSTALL_DIR,
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
        ]
        if seccomp_fd is not None:
            bw += ["--seccomp", str(seccomp_fd)]
        forward = [self._node, f"{JAIL_RUNTIME}/npm-egress.mjs", EGRESS_SOCKET, str(out_fd)]
        # The pipe is the command's descriptor 3 (npm-egress.mjs). On failure, the room left
        # on each tmpfs (``npm_jail.full``): npm does not always say ENOSPC when it ran out.
        then_tar = (
            'command="$1"; shift; "$command" "$@" >&2 3>&- || { status=$?; '
            f"stat -f -c '{FREE_MARK} %a %S' {INSTALL_DIR} {INSTALL_CACHE} >&2; exit $status; }}; "
            f"exec tar -C {INSTALL_DIR} -cf - {shlex.quote(keep)} >&3 3>&-"
        )
        return self._hidden(jail, bw, [*forward, "/bin/sh", "-c", then_tar, "sh", *argv], fds)

    def _allocate_uid(self, owner_id: str) -> int:
        digest = int.from_bytes(hashlib.sha256(owner_id.encode()).digest()[:4], "big")
        n = digest % (1 << 24)
        while self._uids.get(self.config.uid_base + n, owner_id) != owner_id:
            n = (n + 1) % (1 << 24)
        uid = self.config.uid_base + n
        self._uids[uid] = owner_id
        return uid

    @property
    def has_cgroups(self) -> bool:
        return bool(self._cgroups.parents)

    # ---- the view ------------------------------------------------------------------------

    def staged(self, jail: Jail, path: str) -> bool:
        """Whether ``path`` needs no staging (already in the view, or not a component file).
        Cheap: no system call."""
        prefix = f"{self.config.components_dir}/"
        if not path.startswith(prefix):
            return True
        return path[len(prefix) :].split("/", 1)[0] in jail.staged

    def stage(self, jail: Jail, paths: list[str]) -> None:
        """Make the component trees behind ``paths`` (entry files) and the npm sets they link
        to visible in the jail. Blocking; cheap once a tree is staged."""
        store = self.config.components_dir
        for raw in paths:
            path = Path(raw)
            try:
                rel = path.relative_to(store)
            except ValueError:
                continue  # the runtime's own files, mounted for every jail
            if not rel.parts or rel.parts[0] in jail.staged:
                continue
            code_hash = rel.parts[0]
            source = store / code_hash
            if not source.is_dir():
                continue
            modules = source / "node_modules"
            links: dict[str, str] = {}
            if modules.is_symlink():
                target = Path(os.readlink(modules))
                with contextlib.suppress(ValueError):
                    key = target.relative_to(self.config.npm_store_dir.resolve()).parts[0]
                    _link_tree(self.config.npm_store_dir / key, jail.view / "npm" / key)
                    # The store's link names its host path; the view's names the jail's.
                    links["node_modules"] = f"{JAIL_NPM}/{key}/node_modules"
            _link_tree(source, jail.view / "components" / code_hash, links)
            jail.staged.add(code_hash)

    def jail_path(self, path: str) -> str:
        """Where the host's ``path`` (a component file, a runtime file) is in a jail."""
        for host, jailed in self._to_jail:
            if path.startswith(host):
                return jailed + path[len(host) :]
        return path

    def host_text(self, text: str) -> str:
        """``text`` (an error's message or stack from a jail) with the jail's paths back at
        their host paths, for the server's own scrubbing
        (``engine/components/components.scrub_paths``)."""
        if "/sluice/" not in text:
            return text
        for jailed, host in self._to_host:
            text = text.replace(jailed, host)
        return text

    # ---- the command ---------------------------------------------------------------------

    def open_seccomp(self) -> int | None:
        """A descriptor of the compiled filter for one jail's start (bubblewrap reads it to
        the end), or None without a filter. The caller passes it on and closes it."""
        return None if self.seccomp_path is None else os.open(self.seccomp_path, os.O_RDONLY)

    def command(self, jail: Jail, argv: list[str], seccomp_fd: int | None = None) -> Launch:
        """How to start ``argv`` (a Node command) inside ``jail``.

        Descriptors the caller passes (the runner's protocol socket, ``seccomp_fd``, and the
        launch's own ``fds``) stay open through bubblewrap, so they reach Node under the same
        numbers.
        """
        runtime, fds = self._runtime()
        bw = [*self._namespaces(), *self._system(), *runtime, *self._mounts(jail)]
        if seccomp_fd is not None:
            bw += ["--seccomp", str(seccomp_fd)]
        return self._hidden(jail, bw, argv, fds)

    def _runtime(self) -> tuple[list[str], tuple[int, ...]]:
        """Sluice's runtime JS at ``JAIL_RUNTIME``: copied (``--file``) onto a tmpfs of the
        jail's, then read-only. A bind would show its source's host path in the jail's
        mountinfo; a tmpfs's files are its own (its source there is ``/``). The descriptors
        (one per file) are read by bubblewrap and closed with the launch."""
        assert self.root is not None
        args = ["--size", str(self._runtime_bytes), "--tmpfs", JAIL_RUNTIME]
        fds: list[int] = []
        try:
            for name in self._runtime_files:
                fd = os.open(self.root / "runtime" / name, os.O_RDONLY | os.O_CLOEXEC)
                fds.append(fd)
                args += ["--file", str(fd), f"{JAIL_RUNTIME}/{name}"]
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return [*args, "--remount-ro", JAIL_RUNTIME], tuple(fds)

    def _hidden(
        self, jail: Jail, bw: list[str], argv: list[str], fds: tuple[int, ...] = ()
    ) -> Launch:
        """Bubblewrap's options go through a memfd (``--args``), not its command line: its
        command line is the jail's ``/proc/1/cmdline``, and the options name host paths (the
        sandbox's directory, the account's view, the egress socket). The command stays on it
        (bubblewrap reads only options there): it is the command's own cmdline anyway."""
        fd = os.memfd_create("sluice-bwrap-args", os.MFD_CLOEXEC)
        try:
            os.write(fd, b"".join(arg.encode() + b"\0" for arg in bw[1:]))
            os.lseek(fd, 0, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            for other in fds:
                os.close(other)
            raise
        return Launch(self._launcher(jail, [bw[0], "--args", str(fd), "--", *argv]), (fd, *fds))

    def _namespaces(self) -> list[str]:
        """Every namespace its own, a new session, no environment, no capabilities."""
        return [
            self._bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            "--setenv",
            "HOME",
            _JAIL_TMP,
            "--cap-drop",
            "ALL",
        ]

    def _system(self) -> list[str]:
        """Node and the system libraries, read-only, and the jail's own /proc, /dev, /tmp."""
        args = ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        node_prefix = Path(self._node).resolve().parent.parent
        if not str(node_prefix).startswith("/usr"):
            args += ["--ro-bind", str(node_prefix), str(node_prefix)]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        size = str(self.config.tmp_mb * 1024 * 1024)
        return [
            *args,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # Every writable tmpfs has a size: /dev/shm is a directory of /dev's (unsized)
            # tmpfs otherwise, and / and /dev are made read-only once built (``_mounts``).
            "--size",
            size,
            "--tmpfs",
            _JAIL_SHM,
            "--size",
            size,
            "--tmpfs",
            _JAIL_TMP,
        ]

    def _mounts(self, jail: Jail) -> list[str]:
        """The account's view (``JAIL_COMPONENTS``, ``JAIL_NPM``), its egress socket. With
        ``hides_sources``, the view is bound from its overlay (``_Mounts``)."""
        view = jail.view_source or jail.view
        return [
            "--ro-bind",
            str(view / "components"),
            JAIL_COMPONENTS,
            "--ro-bind",
            str(view / "npm"),
            JAIL_NPM,
            # The only way out: no interface but the jail's own lo (docs/runtime.md).
            "--ro-bind-try",
            str(jail.egress_socket),
            EGRESS_SOCKET,
            "--chdir",
            _JAIL_TMP,
            # Last: bubblewrap makes the mount points above on / and /dev (unsized tmpfs).
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
        ]

    def _launcher(self, jail: Jail, bwrap: list[str]) -> list[str]:
        """rlimits, then (as root) the jail's uid, then (with cgroups) joining its cgroups."""
        limits = ["prlimit", "--core=0", "--nofile=4096"]
        if jail.uid is not None and not jail.cgroups:
            # RLIMIT_NPROC counts the real uid's processes: meaningful with a uid of its own.
            limits.append(f"--nproc={self.config.max_processes}")
        cmd = [*limits, "--", *bwrap]
        if jail.uid is not None:
            uid = str(jail.uid)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            cmd = [*drop, "--inh-caps=-all", "--", *cmd]
        if jail.cgroups:
            # Join the cgroups before anything else runs: every process the runner ever starts
            # is born inside them. ``sh`` is still root here; setpriv drops to the jail's uid.
            joins = " && ".join(
                f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))}" for cg in jail.cgroups
            )
            cmd = ["/bin/sh", "-c", f'{joins} && exec "$@"', "sluice-jail", *cmd]
        return cmd


def _link_tree(source: Path, target: Path, links: dict[str, str] | None = None) -> None:
    """Hard-link ``source`` into ``target`` (copy across filesystems), atomically: a
    concurrent reader sees the whole tree or none. ``links``: symlinks of the tree's top
    (name: target) made anew in the copy."""
    if target.exists():
        return
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}-{id(target)}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(source, tmp, symlinks=True, copy_function=_link_or_copy)
        for name, points_to in (links or {}).items():
            (tmp / name).unlink(missing_ok=True)
            (tmp / name).symlink_to(points_to, target_is_directory=True)
        os.rename(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not target.exists():
            raise


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class _Mounts:
    """As root, the mounts that keep host paths out of a jail's mountinfo (a bind's 4th field
    is its source's path within its filesystem; an overlay's options name its layers as they
    were given):

    - ``<root>/egress`` is a tmpfs of its own, so a socket bound into a jail shows
      ``/<n>.sock``;
    - each account with a live jail has an overlay mount of its view at ``<root>/mnt/<n>``
      (its layers given as ``/proc/self/fd/<n>``: the view, and an empty directory, as an
      overlay without an upper layer needs two), so its binds show ``/components`` and
      ``/npm``. Made by a system call (0.1 ms); unmounted in a thread when the account's last
      jail is released (a detaching unmount waits for RCU: 18 ms measured).

    They are in the host's mount namespace (the server binds the sockets; bubblewrap binds
    the views) and are removed at ``close``, or by the next start after a crash (``_sweep``).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._views: dict[Path, tuple[Path, int]] = {}
        self._count = 0
        self._lock = threading.Lock()
        self._unmounting = concurrent.futures.ThreadPoolExecutor(1, "sluice-umount")

    @classmethod
    def open(cls, root: Path) -> _Mounts | None:
        """The mounts, or None (with a warning) where none can be made (a container without
        ``CAP_SYS_ADMIN``): binds then show their host paths."""
        mounts = cls(root)
        (root / "empty").mkdir(mode=0o755)
        (root / "mnt").mkdir(mode=0o711)
        try:
            mounts._mount(b"sluice", root / "egress", b"tmpfs", 0, _EGRESS_TMPFS)
        except OSError as exc:
            log.warning("the jails' mountinfo shows the sandbox's directory: %s", exc)
            mounts._unmounting.shutdown()
            return None
        return mounts

    def view(self, view: Path) -> Path:
        """Where the overlay of ``view`` is (mounted now if it is not): what to bind from."""
        with self._lock:
            point, users = self._views.get(view, (Path(), 0))
            if not users:
                self._count += 1
                point = self.root / "mnt" / str(self._count)
                point.mkdir(mode=0o755)
                layers = [
                    os.open(p, os.O_PATH | os.O_DIRECTORY) for p in (view, self.root / "empty")
                ]
                try:
                    options = ":".join(f"/proc/self/fd/{fd}" for fd in layers)
                    self._mount(
                        b"sluice", point, b"overlay", _MS_RDONLY, f"lowerdir={options}".encode()
                    )
                except OSError:
                    point.rmdir()
                    raise
                finally:
                    for fd in layers:
                        os.close(fd)
            self._views[view] = (point, users + 1)
            return point

    def release(self, view: Path) -> None:
        """One jail of ``view`` fewer: its overlay is unmounted with the last one (running
        jails hold their own copy of it)."""
        with self._lock:
            point, users = self._views.get(view, (Path(), 0))
            if users > 1:
                self._views[view] = (point, users - 1)
                return
            self._views.pop(view, None)
        if users:
            self._unmounting.submit(self._unmount, point)

    def close(self) -> None:
        with self._lock:
            points = [point for point, _ in self._views.values()]
            self._views.clear()
        for point in points:
            self._unmounting.submit(self._unmount, point)
        self._unmounting.shutdown(wait=True)
        self._unmount(self.root / "egress")

    def _mount(self, source: bytes, target: Path, fstype: bytes, flags: int, data: bytes) -> None:
        if self._libc.mount(source, bytes(target), fstype, flags, data) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {fstype.decode()} on {target}: {os.strerror(err)}")

    def _unmount(self, point: Path) -> None:
        self._libc.umount2(bytes(point), _MNT_DETACH)
        with contextlib.suppress(OSError):
            point.rmdir()


def _sweep(tmp: Path) -> None:
    """Unmount the egress tmpfs of sandboxes whose process died without closing them (each
    sandbox's directory is ``sluice-sandbox-<pid>-<random>``), and remove those directories."""
    prefix = f"{tmp}/sluice-sandbox-"
    with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
        points = [line.split()[4] for line in mounts if f" {prefix}" in line]
    libc = ctypes.CDLL(None, use_errno=True)
    roots: set[Path] = set()
    for point in sorted(points, key=len, reverse=True):  # the views before the egress mount
        root = Path(prefix + point.removeprefix(prefix).split("/", 1)[0])
        pid = root.name.removeprefix("sluice-sandbox-").split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        libc.umount2(point.encode(), _MNT_DETACH)
        roots.add(root)
    for root in roots:
        log.info("removing a dead process's sandbox %s", root, extra={"action": "sandbox_swept"})
        shutil.rmtree(root, ignore_errors=True)


def no_strays(keep: set[int | None]) -> None:
    """Mark every descriptor of this process but ``keep`` close-on-exec: uvloop ignores
    ``close_fds``, so one the server inherited (a pipe of the shell that started it) would
    otherwise be open in every account's jail."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                os.set_inheritable(fd, False)
