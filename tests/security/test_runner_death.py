"""A runner that dies mid-call fails its in-flight invocations at once (issue 25).

Its callers were answered only when the protocol socket closed. A process the runner started
and handed the socket to (user code spawning a detached child with its descriptors) keeps it
open after the runner died, and the invocation then waited for its deadline (time-out + 10 s:
"did not answer request 1 in 30 s; restarting it"). Now the runner's exit ends them, after a
moment to read what it wrote before dying. Seen failing on the old code: the result came after
30.0 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from sluice import errors
from sluice.runtime.pool import Invocation, PoolConfig, RunnerPool

#: Spawns a detached ``sleep`` holding every socket of the runner (its protocol socket among
#: them), says its pid through the FIFO, then never returns.
LEAK = """
import fs from "node:fs";
import { spawn } from "node:child_process";
export default { name: "Leak", version: "1", async run() {
  const link = (fd) => { try { return fs.readlinkSync(`/proc/self/fd/${fd}`); } catch { return ""; } };
  const sockets = fs.readdirSync("/proc/self/fd").map(Number)
    .filter((fd) => fd > 2 && link(fd).startsWith("socket:"));
  const stdio = ["ignore", "ignore", "ignore"];
  for (const fd of sockets) stdio[fd] = fd;
  const child = spawn("sleep", ["120"], { detached: true, stdio });
  child.unref();
  fs.writeFileSync(FIFO, `${child.pid}\\n`);
  await new Promise(() => {});
} };
"""


async def test_a_runner_killed_mid_call_fails_its_invocation_at_once(tmp_path: Path) -> None:
    component = tmp_path / "leak.mjs"
    fifo = tmp_path / "pid.fifo"
    component.write_text(LEAK.replace("FIFO", repr(str(fifo))))
    os.mkfifo(fifo)
    # No sandbox: in a jail, the jail's PID namespace ends with its runner (tested below).
    pool = RunnerPool(PoolConfig(max_runners=1, deadline_grace_seconds=10), None)
    leaked = 0
    async with pool:
        call = asyncio.create_task(
            pool.invoke(
                Invocation(
                    owner_id="dies",
                    worker_key="dc_leak:h",
                    entry=str(component),
                    call={"kind": "run", "event": {}, "props": {}, "db": {}, "context": {}},
                    timeout_ms=20_000,
                    memory_mb=64,
                )
            )
        )
        try:
            said = asyncio.create_task(asyncio.to_thread(fifo.read_text))
            await asyncio.wait({said, call}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
            if not said.done():  # unblock the reader: the component failed before its child
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                raise AssertionError(f"the component did not start its child: {call.result()}")
            leaked = int(said.result())
            runner = pool.runner("dies")
            assert runner is not None and runner.pid is not None
            killed = time.monotonic()
            os.kill(runner.pid, signal.SIGKILL)  # the kernel's OOM killer, or a crash
            with pytest.raises(errors.RunnerCrashed, match="exited") as crashed:
                await asyncio.wait_for(asyncio.shield(call), 40)
            waited = time.monotonic() - killed
        finally:
            if leaked:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(leaked, signal.SIGKILL)
    assert "during the invocation" in str(crashed.value)
    assert waited < 3, f"the caller waited {waited:.1f} s for a dead runner"
