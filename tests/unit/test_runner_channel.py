"""The runner's protocol channel (``runtime/protocol.py``) over a real socket pair, and a runner
process that never answers (``NodeRunner.call``'s deadline)."""

from __future__ import annotations

import asyncio
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import uvloop

from sluice.errors import OversizedLine
from sluice.runtime import protocol
from sluice.runtime.protocol import LineChannel
from sluice.runtime.runner import NodeRunner


async def _channel(lines: list[bytes], limit: int = 1 << 20) -> tuple[LineChannel, socket.socket]:
    ours, theirs = socket.socketpair()

    def on_line(line: bytes) -> None:
        if line == b"boom\n":
            raise RuntimeError("a handler that fails")
        lines.append(line)

    channel = LineChannel(on_line, limit)
    transport, _ = await asyncio.get_running_loop().create_unix_connection(
        lambda: channel, sock=ours
    )
    channel.attach(transport)
    theirs.setblocking(False)
    return channel, theirs


async def _until(predicate: Callable[[], bool]) -> None:
    """Let the loop run until ``predicate()`` holds (bounded: 1,000 turns)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the channel did not get there")


async def test_lines_arrive_whole_however_the_bytes_are_cut() -> None:
    await _lines_arrive_whole()


def test_the_same_on_uvloop_the_server_s_loop() -> None:
    uvloop.run(_lines_arrive_whole())


async def _lines_arrive_whole() -> None:
    lines: list[bytes] = []
    channel, theirs = await _channel(lines)
    loop = asyncio.get_running_loop()
    for chunk in (b'{"a":', b'1}\n{"b":2}\nboom\n{"c"', b":3}\n"):
        await loop.sock_sendall(theirs, chunk)
    await _until(lambda: len(lines) == 3)
    assert lines == [b'{"a":1}\n', b'{"b":2}\n', b'{"c":3}\n']  # the failing handler skipped
    channel.write(b"out\n")
    await channel.drain()
    assert await loop.sock_recv(theirs, 100) == b"out\n"
    theirs.close()
    assert await asyncio.wait_for(channel.closed, 5) is None  # EOF
    try:
        channel.write(b"late\n")
    except ConnectionError:
        pass
    else:
        raise AssertionError("a write after the end must fail")


async def test_a_line_over_the_limit_closes_the_channel() -> None:
    lines: list[bytes] = []
    channel, theirs = await _channel(lines, limit=64)
    await asyncio.get_running_loop().sock_sendall(theirs, b"ok\n" + b"x" * 100)
    ended = await asyncio.wait_for(channel.closed, 5)
    assert isinstance(ended, OversizedLine) and lines == [b"ok\n"]
    theirs.close()


async def test_a_runner_that_never_answers_is_failed_at_the_deadline_and_killed(
    tmp_path: Path,
) -> None:
    mute = tmp_path / "mute-node"
    mute.write_text("#!/bin/sh\nexec sleep 600\n")
    mute.chmod(mute.stat().st_mode | stat.S_IXUSR)
    runner = NodeRunner("mute", node=str(mute))
    await runner.start()
    try:
        result = await asyncio.wait_for(runner.call({"type": "stats"}, deadline=0.2), 10)
        assert not result.ok and result.error is not None
        assert result.error["code"] == protocol.RUNNER_CRASHED
        assert "stopped answering" in result.error["message"]
        assert runner._proc is not None
        await asyncio.wait_for(runner._proc.wait(), 10)  # killed, not left to sleep 600 s
        assert not runner.alive and runner.in_flight == 0
    finally:
        await runner.close()
