"""A webhook receiver for bench/deliveries.py, in a process of its own (its CPU is not the
measured process's): answers every POST 200 at once (keep-alive), counts them, their
distinct ``Idempotency-Key`` values and the connections they came on, and the monotonic
times (system-wide on Linux) of the first and last. ``GET /stats`` answers those as JSON;
``POST /reset`` clears them.

Run: python bench/_webhook_target.py PORT
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

STATS: dict[str, float] = {"count": 0, "first": 0.0, "last": 0.0, "connections": 0}
KEYS: set[str] = set()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    counted = False  # a connection is counted at its first delivery (not the bench's polls)
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length, key = 0, ""
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "idempotency-key":
                    key = value.strip()
            if length:
                await reader.readexactly(length)
            body = b"ok"
            if method == "GET" and path == "/stats":
                body = json.dumps({**STATS, "keys": len(KEYS)}).encode()
            elif method == "POST" and path == "/reset":
                STATS.update(count=0, first=0.0, last=0.0, connections=0)
                KEYS.clear()
            else:
                if not counted:
                    STATS["connections"] += 1
                    counted = True
                now = time.monotonic()
                if not STATS["count"]:
                    STATS["first"] = now
                STATS["count"] += 1
                STATS["last"] = now
                KEYS.add(key)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
