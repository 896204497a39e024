"""``sluice`` processes forked from one that has imported Sluice already (a zygote), for the
tests that start many servers and commands: a server's start is ~1.4 s of CPU, most of it
imports (``bench/server_start.py``); forked from the zygote, the same start skips them.

The child runs the real command (``sluice.cli.main.app``) with its own arguments, environment,
working folder and standard streams; only the imported modules are shared (copy-on-write). It
is a real process of its own: signals, ``kill -9``, its Node runners under it and its exit
code are those of an exec'd ``sluice``. ``tests/e2e`` still execs the installed ``sluice``
command (the README's), so the entry point itself stays tested.

One zygote per test process, started at its first use, over an abstract Unix socket
(``SOCK_SEQPACKET``: one request a message, the child's stdin, stdout and stderr passed with
it). The zygote forks, answers the child's pid on that connection, and later its exit status
when it reaps it; ``Forked`` is what the test holds, shaped as ``subprocess.Popen`` (``pid``,
``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``returncode``, ``stdout``,
``stderr``). The zygote ends when the test process does (its stdin is a pipe from it) and kills
the children still running then.

``run`` is ``subprocess.run`` for a command that ends (``accounts create``...).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
#: What the zygote imports before its first fork: the command and what ``serve`` imports.
PRELOAD = (
    "sluice.cli.main",
    "sluice.api.app",
    "sluice.api.connections",
    "sluice.platform",
    "uvicorn",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.lifespan.on",
    "uvicorn.loops.uvloop",
    "tests.sluice_cheap_hashes",
)
_MESSAGE = 1 << 20
_lock = threading.Lock()
_zygote: list[tuple[subprocess.Popen[bytes], bytes]] = []


class Forked:
    """A ``sluice`` process forked by the zygote, as ``subprocess.Popen`` shows one."""

    def __init__(
        self,
        args: Sequence[str],
        pid: int,
        status: socket.socket,
        stdin: IO[Any] | None,
        stdout: IO[Any] | None,
        stderr: IO[Any] | None,
    ) -> None:
        self.args = list(args)
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._status = status

    def _read(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        self._status.settimeout(timeout)
        try:
            message = self._status.recv(_MESSAGE)
        except (TimeoutError, BlockingIOError):
            return None
        self._status.close()
        # No message: the zygote itself is gone (it kills its children as it ends).
        self.returncode = json.loads(message)["status"] if message else -signal.SIGKILL
        return self.returncode

    def poll(self) -> int | None:
        return self._read(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped yet: the pid is still this process's
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _stream(
    choice: int | IO[Any] | None, fd: int, mode: str, text: bool
) -> tuple[int, IO[Any] | None]:
    """The fd the child gets as ``fd`` and the test's end of it (a pipe's), as Popen's
    ``stdin``/``stdout``/``stderr`` arguments choose."""
    if choice is None:
        return os.dup(fd), None
    if choice == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None
    if choice == subprocess.PIPE:
        read, write = os.pipe()
        ours, theirs = (write, read) if mode == "w" else (read, write)
        return theirs, open(ours, mode + ("" if text else "b"))
    if isinstance(choice, int):
        return os.dup(choice), None
    return os.dup(choice.fileno()), None


def popen(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    cheap_hashes: bool = False,
) -> Forked:
    """``sluice <args>`` forked from the zygote. ``cheap_hashes``: passwords hashed at
    argon2id's lowest cost, as ``tests/sluice_cheap_hashes.py`` runs the command."""
    streams = [
        _stream(stdin, 0, "w", text),
        _stream(stdout, 1, "r", text),
        _stream(stderr, 2, "r", text),
    ]
    request = {
        "args": list(args),
        "env": dict(os.environ if env is None else env),
        "cwd": str(cwd or os.getcwd()),
        "cheap_hashes": cheap_hashes,
    }
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(_address())
        socket.send_fds(conn, [json.dumps(request).encode()], [fd for fd, _ in streams])
        answer = conn.recv(_MESSAGE)
    except BaseException:
        conn.close()
        raise
    finally:
        for fd, _ in streams:
            os.close(fd)
    if not answer:
        conn.close()
        raise RuntimeError("the test zygote did not start the command (see its stderr)")
    pid = json.loads(answer)["pid"]
    return Forked(args, pid, conn, streams[0][1], streams[1][1], streams[2][1])


def run(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: str | None = None,
    check: bool = False,
    timeout: float = 120,
    cheap_hashes: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sluice, *args], capture_output=True, text=True)`` forked from the
    zygote: its output goes to temporary files, read once it has ended."""
    with (
        tempfile.TemporaryFile("w+") as given,
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
    ):
        given.write(input or "")
        given.flush()
        given.seek(0)
        child = popen(
            args, env=env, cwd=cwd, stdin=given, stdout=out, stderr=err, cheap_hashes=cheap_hashes
        )
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(30)
            raise
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(["sluice", *args], code, out.read(), err.read())
    if check:
        done.check_returncode()
    return done


def _address() -> bytes:
    """The zygote's socket, started at the first call of this process."""
    with _lock:
        if _zygote and _zygote[0][0].poll() is not None:
            _zygote.clear()  # it died (its stderr says why): a new one
        if not _zygote:
            address = b"\0sluice-test-zygote-" + secrets.token_hex(8).encode()
            proc = subprocess.Popen(
                [sys.executable, "-c", "import tests.zygote as z; z._main()", address.hex()],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=ROOT,
            )
            assert proc.stdout is not None
            ready = proc.stdout.readline()  # after its imports, once it listens
            if ready != b"ready\n":
                proc.wait(30)
                raise RuntimeError("the test zygote did not start (see its stderr)")
            _zygote.append((proc, address))
            atexit.register(_stop)
        return _zygote[0][1]


def _stop() -> None:
    """The zygote told to end (its stdin closed), and reaped."""
    while _zygote:
        proc, _ = _zygote.pop()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        proc.stdout.close()


# ---- the zygote ---------------------------------------------------------------------------


def _main() -> None:
    address = bytes.fromhex(sys.argv[1])
    sys.path[0] = str(ROOT)  # not "": a child's own working folder must not change imports
    gc.disable()
    for name in PRELOAD:
        __import__(name)
    gc.enable()
    gc.freeze()  # what the imports made is never collected: fewer pages copied by a child
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    selector.register(sys.stdin.buffer, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    _fork(conn, children, closing=(listener.fileno(), wake_read, wake_write))
                elif key.fileobj is sys.stdin.buffer:
                    if not os.read(0, 4096):  # the test process has ended
                        return
                else:
                    os.read(wake_read, 4096)
                    _reap(children)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _fork(
    conn: socket.socket, children: dict[int, socket.socket], closing: tuple[int, ...]
) -> None:
    message, fds, _, _ = socket.recv_fds(conn, _MESSAGE, 3)
    if not message or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        _child(request, fds, conn, children, closing)  # never returns
    for fd in fds:
        os.close(fd)
    conn.send(json.dumps({"pid": pid}).encode())
    children[pid] = conn


def _reap(children: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())
            conn.close()


def _child(
    request: dict[str, Any],
    fds: list[int],
    conn: socket.socket,
    children: dict[int, socket.socket],
    closing: tuple[int, ...],
) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Ctrl+C as in a terminal, whatever the zygote inherited (a test process started in
        # the background by a non-interactive shell ignores SIGINT).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        conn.close()
        for other in children.values():
            other.close()
        for fd in closing:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        if request["cheap_hashes"]:
            from sluice import passwords
            from tests.sluice_cheap_hashes import CHEAP

            passwords._hasher = CHEAP
        from sluice.cli.main import app

        sys.argv = ["sluice", *request["args"]]
        try:
            app(args=request["args"], prog_name="sluice")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)
