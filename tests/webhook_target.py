"""A webhook receiver on 127.0.0.1 for tests: records every request it reads; can be taken
down (its port closed: connections refused) and brought back on the same port, answer a
chosen status, or read a request and hang up without answering (the sender cannot know it
arrived: it sends it again, a duplicate the receiver drops by its ``Idempotency-Key``)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def key(self) -> str:
        return self.headers.get("idempotency-key", "")

    def json(self) -> Any:
        return json.loads(self.body)


class Target:
    def __init__(self) -> None:
        self.received: list[Received] = []
        #: The status answered.
        self.status = 200
        #: Requests still to read and then hang up on without answering.
        self.hang_ups = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._arrived = asyncio.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Close the port: connections are refused until ``up()``."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Target:
        await self.up()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.down()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: several requests on one connection
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.received.append(Received(path, headers, body))
                async with self._arrived:
                    self._arrived.notify_all()
                if self.hang_ups > 0:
                    self.hang_ups -= 1
                    return
                reason = b"OK" if self.status == 200 else b"Nope"
                writer.write(
                    b"HTTP/1.1 %d %s\r\nContent-Length: 2\r\n\r\nok" % (self.status, reason)
                )
                await writer.drain()
        finally:
            writer.close()

    async def wait_for(self, count: int) -> None:
        """Until ``count`` requests were read in all (woken by each one, no polling)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.received) >= count)

    def by_key(self) -> dict[str, list[Received]]:
        out: dict[str, list[Received]] = {}
        for item in self.received:
            out.setdefault(item.key, []).append(item)
        return out
