"""The runner's protocol socket as JSON lines, without a reading task in between.

Each complete line goes to ``on_line`` from ``data_received``, in the same step of the event
loop that read it: a result settles its caller's future at once, where a ``StreamReader``
would first wake a task blocked in ``readline()`` (one more step of the loop per message, on
the path of every run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

log = logging.getLogger(__name__)


class OversizedLine(ValueError):
    """The runner sent more than the channel's limit without a newline."""


class LineChannel(asyncio.Protocol):
    def __init__(self, on_line: Callable[[bytes], None], limit: int) -> None:
        self._on_line = on_line
        self._limit = limit
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        #: Resolves when the socket is closed: None at EOF, else why (``OversizedLine``, an
        #: ``OSError``).
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self._drained: asyncio.Future[None] | None = None
        self._out: list[bytes] | None = None

    # ---- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.attach(transport)

    def attach(self, transport: asyncio.BaseTransport) -> None:
        """Take ``transport`` (``create_unix_connection`` returns it; uvloop calls
        ``connection_made`` only on a later turn of the loop)."""
        if self._transport is None and not self.closed.done():
            self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            self._deliver(bytes(buffer[start : end + 1]))
            start = end + 1
        del buffer[:start]
        if len(buffer) > self._limit:
            buffer.clear()
            self._end(OversizedLine(f"a line over {self._limit} bytes"))
            if self._transport is not None:
                self._transport.close()

    def eof_received(self) -> bool:
        return False  # close our end too

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        self._transport = None

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # ---- for the runner ---------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data``; ``ConnectionError`` when the socket is closed. What is written in
        one step of the loop leaves in one system call on the next (many runs starting
        together wake the runner once, not once each)."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the runner's protocol socket is closed")
        if self._out is None:
            self._out = [data]
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            self._out.append(data)

    def _flush(self) -> None:
        out, self._out = self._out, None
        if out and self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))

    async def drain(self) -> None:
        """Wait while the socket's send buffer is over its high-water mark (as of the last
        step's writes)."""
        drained = self._drained
        if drained is not None:
            await asyncio.shield(drained)
        if self._transport is None:
            raise ConnectionError("the runner's protocol socket is closed")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _deliver(self, line: bytes) -> None:
        try:
            self._on_line(line)
        except Exception:  # one bad message must not stop the channel
            log.exception("a runner message could not be handled")

    def _end(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_exception(ConnectionError("the runner's protocol socket closed"))
