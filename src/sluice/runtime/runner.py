"""One Node runner process, spoken to in JSON lines (docs/runner-protocol.md).

The protocol has a descriptor of its own (one end of a socket pair, ``--protocol-fd``):
whatever user code writes to fd 1 and 2 is only logged, it can never corrupt or forge a
result. With a sandbox the process starts inside the account's jail (``sandbox.py``);
without one it gets a minimal environment (``PATH`` only). Either way its workers get only
what each invocation names. If the process dies, every request in flight ends with a
``RUNNER_CRASHED`` result at once (``OUT_OF_MEMORY`` when the jail's memory limit killed it):
no caller ever waits on a dead process, even when something it started still holds the
protocol socket open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice import errors
from sluice.domain import limits, text
from sluice.errors import OversizedLine
from sluice.runtime import protocol, watchdog
from sluice.runtime import sandbox as sandbox_rules
from sluice.runtime.egress import EgressProxy
from sluice.runtime.port import RespondCallback, StoreCallback
from sluice.runtime.protocol import LineChannel, Result
from sluice.runtime.sandbox import EGRESS_SOCKET, Jail, Sandbox

log = logging.getLogger(__name__)

#: A request in flight: its result, and who hears its ``respond`` and ``store`` messages.
_Pending = tuple["asyncio.Future[Result]", RespondCallback | None, StoreCallback | None]

SCRIPT = Path(__file__).parent / "js" / "runner.mjs"

#: Lines of a runner's own stdout/stderr logged per window; the rest are counted, not logged,
#: so user code writing to fd 1 or 2 in a loop cannot flood the server's log.
_OUTPUT_LINES = 20
_OUTPUT_WINDOW_S = 10.0
_OUTPUT_LINE_CHARS = 500
#: After the runner's process exited, how long its protocol socket may still deliver what it
#: wrote before dying (seconds); then its callers are answered whether or not the socket closed.
_DRAIN_S = 0.5
#: How often the RSS watchdog looks, when no cgroup limits the jail's memory.
_WATCH_S = 0.25


class NodeRunner:
    def __init__(
        self,
        name: str,
        *,
        node: str = "node",
        max_workers: int = 32,
        idle_ms: int = 300_000,
        sandbox: Sandbox | None = None,
        uid: int | None = None,
    ) -> None:
        self.name = name
        #: The account's jail uid (stored with it); None: the sandbox picks one.
        self.uid = uid
        self._argv = [
            node,
            str(SCRIPT),
            "--max-workers",
            str(max_workers),
            "--idle-ms",
            str(idle_ms),
        ]
        self.sandbox = sandbox
        self.jail: Jail | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._writer: LineChannel | None = None
        self._out_count = 0
        self._out_dropped = 0
        self._out_window = 0.0
        self._oom = False
        self._watcher: asyncio.Task[None] | None = None
        self._proxy: EgressProxy | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._store_tasks: set[asyncio.Task[None]] = set()
        self.last_used = time.monotonic()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        ours, theirs = socket.socketpair()
        argv = [*self._argv, "--protocol-fd", str(theirs.fileno())]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        filter_fd: int | None = None
        extra: tuple[int, ...] = ()
        if self.sandbox is not None:
            self.jail = jail = self.sandbox.jail(self.name, uid=self.uid)
            self._proxy = EgressProxy(jail.egress_socket, self.name, self.sandbox.egress_policy)
            await self._proxy.__aenter__()
            if jail.uid is not None:
                os.chown(jail.egress_socket, jail.uid, jail.uid)
            filter_fd = self.sandbox.open_seccomp()
            argv[1] = self.sandbox.jail_path(argv[1])  # the runner's script, as the jail sees it
            node_argv = [*argv, "--reap-children", "--egress-socket", EGRESS_SOCKET]
            launch = self.sandbox.command(jail, node_argv, filter_fd)
            argv, extra = launch.argv, launch.fds
            env = {}
        try:
            sandbox_rules.no_strays(keep={theirs.fileno(), filter_fd, *extra})
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(
                    (theirs.fileno(), *extra)
                    if filter_fd is None
                    else (theirs.fileno(), filter_fd, *extra)
                ),
                env=env,
                # Bubblewrap stays the jail's PID 1, readable there: its environment (the shell
                # that joins the cgroups sets PWD) and its cwd must not be the server's.
                cwd="/" if self.sandbox is not None else None,
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            await self._release_jail()
            raise
        finally:
            theirs.close()
            for fd in extra:
                os.close(fd)
            if filter_fd is not None:
                os.close(filter_fd)
        channel = LineChannel(self._dispatch, limit=1 << 27)
        transport, _ = await asyncio.get_running_loop().create_unix_connection(
            lambda: channel, sock=ours
        )
        channel.attach(transport)
        self._writer = channel
        self._tasks = [
            asyncio.create_task(self._read_protocol(self._proc, channel)),
            asyncio.create_task(self._read_output(self._proc.stdout, "stdout")),
            asyncio.create_task(self._read_output(self._proc.stderr, "stderr")),
        ]
        if self.sandbox is not None and not self.sandbox.has_cgroups:
            self._watcher = asyncio.create_task(self._watch_memory(self._proc))

    async def stage(self, paths: list[str]) -> None:
        """Make the component files behind ``paths`` visible in this runner's jail."""
        jail, sandbox = self.jail, self.sandbox
        if jail is None or sandbox is None:
            return
        if all(sandbox.staged(jail, p) for p in paths):
            return
        await asyncio.to_thread(sandbox.stage, jail, paths)

    async def call(
        self,
        message: dict[str, Any],
        on_respond: RespondCallback | None = None,
        deadline: float = 60.0,
        on_store: StoreCallback | None = None,
    ) -> Result:
        """Send one request (``invoke``, ``evict``, ``stats``) and wait for its result.

        The runner answers every request, time-outs included; ``deadline`` (seconds) is the
        backstop for a runner that cannot (its stdout corrupted by user code writing to fd 1):
        the caller gets a failure, and the runner is killed so it starts clean.
        """
        if not self.alive or self._writer is None:
            return Result.failure(protocol.RUNNER_CRASHED, "the Node runner is not running")
        self.last_used = time.monotonic()
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, on_respond, on_store)
        try:
            async with self._write_lock:
                self._writer.write(protocol.encode({**message, "id": request_id}))
                await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._pending.pop(request_id, None)
            return Result.failure(protocol.RUNNER_CRASHED, f"the Node runner is gone: {exc}")
        # A timer, not wait_for (two more futures per call, on the path of every run).
        timer = asyncio.get_running_loop().call_later(deadline, _expire, future)
        try:
            return await future
        except TimeoutError:
            log.error(
                "runner %s did not answer request %d in %.0f s; restarting it",
                self.name,
                request_id,
                deadline,
            )
            self.kill()
            return Result.failure(
                protocol.RUNNER_CRASHED, "the Node runner stopped answering; it was restarted"
            )
        finally:
            timer.cancel()
            self._pending.pop(request_id, None)
            self.last_used = time.monotonic()

    async def call_many(
        self,
        message: dict[str, Any],
        calls: Sequence[tuple[dict[str, Any], RespondCallback | None, StoreCallback | None]],
        deadline: float = 60.0,
    ) -> list[Result]:
        """Send one ``invoke_batch`` (``message``: its worker key, entry, env, limits and
        ``shared`` part of every call) carrying ``calls`` (each its own part of the call and
        who hears its ``respond`` and ``store`` messages); their results, in order. Each call
        gets an id of its own, so its messages and its ``result`` line find it as a lone
        call's would (docs/runner-protocol.md). ``deadline`` is the backstop of ``call``."""
        if not self.alive or self._writer is None:
            failure = Result.failure(protocol.RUNNER_CRASHED, "the Node runner is not running")
            return [failure for _ in calls]
        self.last_used = time.monotonic()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Result]] = []
        items: list[dict[str, Any]] = []
        for call, on_respond, on_store in calls:
            self._next_id += 1
            future: asyncio.Future[Result] = loop.create_future()
            self._pending[self._next_id] = (future, on_respond, on_store)
            futures.append(future)
            items.append({"id": self._next_id, "call": call})
        first_id = self._next_id - len(calls) + 1
        # Its own id: a runner that refuses the batch itself answers it (a BAD_MESSAGE result)
        # and every call gets that answer.
        self._next_id += 1
        batch_id = self._next_id
        refused: asyncio.Future[Result] = loop.create_future()
        self._pending[batch_id] = (refused, None, None)
        try:
            try:
                async with self._write_lock:
                    batch = {**message, "type": "invoke_batch", "id": batch_id, "calls": items}
                    self._writer.write(protocol.encode(batch))
                    await self._writer.drain()
            except (ConnectionError, RuntimeError) as exc:
                failure = Result.failure(protocol.RUNNER_CRASHED, f"the Node runner is gone: {exc}")
                return [failure for _ in calls]
            timer = loop.call_later(deadline, _expire, refused)
            try:
                gathered = asyncio.gather(*futures)
                either: set[asyncio.Future[Any]] = {gathered, refused}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if not gathered.done():
                    gathered.cancel()
                    try:
                        answer = refused.result()
                    except TimeoutError:
                        log.error(
                            "runner %s did not answer batch %d in %.0f s; restarting it",
                            self.name,
                            batch_id,
                            deadline,
                        )
                        self.kill()
                        answer = Result.failure(
                            protocol.RUNNER_CRASHED,
                            "the Node runner stopped answering; it was restarted",
                        )
                    return [f.result() if f.done() else answer for f in futures]
                return list(gathered.result())
            finally:
                timer.cancel()
        finally:
            for request_id in range(first_id, batch_id + 1):
                self._pending.pop(request_id, None)
            self.last_used = time.monotonic()

    async def _read_protocol(self, proc: asyncio.subprocess.Process, channel: LineChannel) -> None:
        """Lines are handled as they arrive (``_dispatch``); this waits for the end of the
        socket or of the process, whichever comes first (then the ``finally`` answers every
        caller)."""
        closed = channel.closed
        either: set[asyncio.Future[Any]] = {closed, asyncio.ensure_future(proc.wait())}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not channel.closed.done():
                # The runner is gone but a process it started still holds the socket (user
                # code handing its descriptors to a detached child): what the runner wrote
                # before it died is read within a moment, then its callers are answered.
                await asyncio.wait({closed}, timeout=_DRAIN_S)
            elif isinstance(ended := channel.closed.result(), OversizedLine):
                log.error("runner %s sent an oversized line: %s", self.name, ended)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        finally:
            code = await proc.wait()
            if self._writer is not None:
                self._writer.close()
            oom = self._oom or (self.jail is not None and self.jail.oom_killed())
            await self._release_jail()
            if self._pending:
                log.warning(
                    "runner %s exited (code %s%s) with %d invocations in flight",
                    self.name,
                    code,
                    ", out of memory" if oom else "",
                    len(self._pending),
                    extra={"action": "runner_crashed", "runner": self.name},
                )
            if oom:
                limit = self.sandbox.config.memory_mb if self.sandbox else 0
                failure = Result(
                    ok=False,
                    error={
                        "name": "OutOfMemoryError",
                        "code": protocol.OUT_OF_MEMORY,
                        "message": f"the account's runner went over its memory limit "
                        f"({limit} MB for all its code, SLUICE_RUNNER_MEMORY_MB) and was stopped",
                    },
                )
            else:
                failure = Result.failure(
                    protocol.RUNNER_CRASHED,
                    f"the Node runner exited (code {code}) during the invocation",
                )
            for future, *_ in list(self._pending.values()):
                if not future.done():
                    future.set_result(failure)

    async def _release_jail(self) -> None:
        if self._proxy is not None:
            proxy, self._proxy = self._proxy, None
            # The proxy's tunnels belong to this runner: they end with it.
            await proxy.__aexit__(None, None, None)
        if self.jail is not None and self.sandbox is not None:
            self.sandbox.release(self.jail)

    async def _watch_memory(self, proc: asyncio.subprocess.Process) -> None:
        """Without cgroups: kill the jail when its processes' RSS plus what its tmpfs mounts
        hold passes the limit (``watchdog.py``)."""
        assert self.sandbox is not None
        limit = self.sandbox.config.memory_mb * 1024 * 1024
        while proc.returncode is None:
            used = await asyncio.to_thread(watchdog.jail_memory, proc.pid)
            if used > limit:
                self._oom = True
                log.warning("runner %s over its memory limit (%d bytes); killed", self.name, used)
                self.kill()
                return
            await asyncio.sleep(_WATCH_S)

    def _dispatch(self, line: bytes) -> None:
        try:
            message = protocol.decode(line)
            entry = self._pending.get(int(message["id"]))
        except RecursionError:  # user code's values nest deeper than Python's parser goes
            message = protocol.too_deep_answer(line)
            entry = self._pending.get(int(message["id"])) if message else None
        except (ValueError, KeyError, TypeError):
            log.error("runner %s sent an unreadable line: %.200r", self.name, line)
            return
        if entry is None:
            return
        future, on_respond, on_store = entry
        if message.get("type") == "respond":
            if on_respond is not None:
                on_respond(protocol.decode_response(message))
        elif message.get("type") == "store":
            task = asyncio.create_task(self._answer_store(message, on_store))
            self._store_tasks.add(task)
            task.add_done_callback(self._store_tasks.discard)
        elif message.get("type") == "result" and not future.done():
            over = limits.payload_error(len(line), protocol.MAX_RESULT_BYTES)
            if over is not None:
                future.set_result(Result(ok=False, error=over))
            else:
                future.set_result(protocol.decode_result(message, line))

    async def _answer_store(self, message: dict[str, Any], on_store: StoreCallback | None) -> None:
        """One data store call of user code, answered with a ``store_result`` (its value, or
        the error user code sees thrown)."""
        answer: dict[str, Any] = {
            "type": "store_result",
            "id": message["id"],
            "req": message.get("req"),
        }
        try:
            if on_store is None:
                raise errors.InvalidRequest("data stores are not available to this invocation")
            request = message.get("request")
            if message.get("too_deep") or text.too_deep(request, text.MAX_DEPTH + 2):
                raise errors.InvalidRequest(f"values nest deeper than {text.MAX_DEPTH} levels")
            answer |= {
                "ok": True,
                "value": await on_store(request if isinstance(request, dict) else {}),
            }
        except errors.SluiceError as exc:
            answer |= {
                "ok": False,
                "error": {"name": "DataStoreError", "code": exc.code, "message": exc.message},
            }
        except Exception:  # a bug: user code gets an answer, never a hang
            log.exception("runner %s: a data store call failed", self.name)
            failed = "the data store call failed in Sluice; it has been logged"
            answer |= {"ok": False, "error": {"name": "DataStoreError", "message": failed}}
        if self._writer is None or not self.alive:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            async with self._write_lock:
                self._writer.write(protocol.encode(answer))
                await self._writer.drain()

    async def _read_output(self, stream: asyncio.StreamReader | None, name: str) -> None:
        """The runner's own fd 1 and 2: diagnostics, or user code writing there directly.
        Logged (rate-limited, each line cut), never parsed. Read in chunks for as long as the
        runner lives, whatever the lines' length: a reader that stops (``readline`` gives up
        past 64 KiB without a newline) leaves the pipe full, and the next write to it blocks
        the runner's thread that made it."""
        if stream is None:
            return
        partial = b""  # the start of a line not ended yet, at most _OUTPUT_LINE_CHARS of it
        cut = False  # whether the line being read was already logged (cut) or dropped
        with contextlib.suppress(ConnectionError):
            while chunk := await stream.read(1 << 16):
                lines = chunk.split(b"\n")
                for i, piece in enumerate(lines):
                    ended = i < len(lines) - 1
                    if not cut:
                        partial += piece[: _OUTPUT_LINE_CHARS - len(partial)]
                        if ended or len(partial) >= _OUTPUT_LINE_CHARS:
                            self._log_output(name, partial)
                            partial, cut = b"", not ended
                    elif ended:
                        cut = False
        if partial:
            self._log_output(name, partial)

    def _log_output(self, name: str, line: bytes) -> None:
        now = time.monotonic()
        if now - self._out_window > _OUTPUT_WINDOW_S:
            if self._out_dropped:
                log.warning("runner %s: %d output lines not logged", self.name, self._out_dropped)
            self._out_window, self._out_count, self._out_dropped = now, 0, 0
        if self._out_count >= _OUTPUT_LINES:
            self._out_dropped += 1
            return
        self._out_count += 1
        text = line.decode(errors="replace").rstrip()
        log.warning("runner %s %s: %s", self.name, name, text)

    async def close(self, grace: float = 2.0) -> None:
        """Close the protocol socket (the runner exits on EOF), then SIGKILL if it lingers."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None and self._writer is not None:
            with contextlib.suppress(ConnectionError, RuntimeError, OSError):
                self._writer.close()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._watcher is not None:
            self._watcher.cancel()
        # The output readers end with the pipes, which a process the runner started may still
        # hold: they get a moment, then are cancelled.
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=grace)
        for task in [*self._tasks, *([self._watcher] if self._watcher else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def kill(self) -> None:
        """Kill the process and every process it started, now (the watchdog, a runner that
        stopped answering; tests use this to show a crash is survived)."""
        if self._proc is not None and self._proc.returncode is None:
            for pid in reversed(watchdog.tree(self._proc.pid)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


def _expire(future: asyncio.Future[Result]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def _tree_rss(pid: int) -> int:
    """RSS of ``pid`` and its descendants, bytes (0 for processes already gone)."""
    return watchdog.rss(watchdog.tree(pid))
