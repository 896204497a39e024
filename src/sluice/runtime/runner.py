"""One Node runner process, spoken to in JSON lines (docs/runner-protocol.md).

The process gets a minimal environment (``PATH`` only): nothing of the host's reaches it, and
its workers get only what each invocation names. If the process dies, every request in flight
ends with a ``RUNNER_CRASHED`` result at once: no caller ever waits on a dead process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.runtime import protocol
from sluice.runtime.protocol import Response, Result

log = logging.getLogger(__name__)

SCRIPT = Path(__file__).parent / "js" / "runner.mjs"

RespondCallback = Callable[[Response], None]


class Runner:
    def __init__(
        self,
        name: str,
        *,
        node: str = "node",
        max_workers: int = 32,
        idle_ms: int = 300_000,
    ) -> None:
        self.name = name
        self._argv = [
            node,
            str(SCRIPT),
            "--max-workers",
            str(max_workers),
            "--idle-ms",
            str(idle_ms),
        ]
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, tuple[asyncio.Future[Result], RespondCallback | None]] = {}
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
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
        self._proc = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            limit=1 << 27,
            start_new_session=True,
        )
        self._tasks = [
            asyncio.create_task(self._read_stdout(self._proc)),
            asyncio.create_task(self._read_stderr(self._proc)),
        ]

    async def call(
        self,
        message: dict[str, Any],
        on_respond: RespondCallback | None = None,
        deadline: float = 60.0,
    ) -> Result:
        """Send one request (``invoke``, ``evict``, ``stats``) and wait for its result.

        The runner answers every request, time-outs included; ``deadline`` (seconds) is the
        backstop for a runner that cannot (its stdout corrupted by user code writing to fd 1):
        the caller gets a failure, and the runner is killed so it starts clean.
        """
        if not self.alive or self._proc is None or self._proc.stdin is None:
            return Result.failure(protocol.RUNNER_CRASHED, "the Node runner is not running")
        self.last_used = time.monotonic()
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, on_respond)
        try:
            async with self._write_lock:
                self._proc.stdin.write(protocol.encode({**message, "id": request_id}))
                await self._proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._pending.pop(request_id, None)
            return Result.failure(protocol.RUNNER_CRASHED, f"the Node runner is gone: {exc}")
        try:
            return await asyncio.wait_for(future, deadline)
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
            self._pending.pop(request_id, None)
            self.last_used = time.monotonic()

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while line := await proc.stdout.readline():
                self._dispatch(line)
        except (ValueError, asyncio.LimitOverrunError) as exc:
            log.error("runner %s sent an oversized line: %s", self.name, exc)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        finally:
            code = await proc.wait()
            if self._pending:
                log.warning(
                    "runner %s exited (code %s) with %d invocations in flight",
                    self.name,
                    code,
                    len(self._pending),
                    extra={"action": "runner_crashed", "runner": self.name},
                )
            for future, _ in list(self._pending.values()):
                if not future.done():
                    future.set_result(
                        Result.failure(
                            protocol.RUNNER_CRASHED,
                            f"the Node runner exited (code {code}) during the invocation",
                        )
                    )

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            entry = self._pending.get(int(message["id"]))
        except (ValueError, KeyError, TypeError):
            log.error("runner %s sent an unreadable line: %.200r", self.name, line)
            return
        if entry is None:
            return
        future, on_respond = entry
        if message.get("type") == "respond":
            if on_respond is not None:
                on_respond(protocol.decode_response(message))
        elif message.get("type") == "result" and not future.done():
            future.set_result(protocol.decode_result(message))

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            log.warning("runner %s: %s", self.name, line.decode(errors="replace").rstrip())

    async def close(self, grace: float = 2.0) -> None:
        """Close stdin (the runner exits on EOF), then SIGKILL if it lingers."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def kill(self) -> None:
        """Kill the process now (tests use this to show a crash is survived)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
