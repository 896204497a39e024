"""The ``asgi`` mode of bench/isolation_floor.py: the floor of Sluice's own shape (uvicorn with
httptools and uvloop, as ``sluice serve``; the step in a worker thread of a Node runner
process; each run stored in SQLite before its answer) with nothing of the engine between: a
plain ASGI callable hands each request's body to the runner (``bench/_floor.mjs runner``), the
runs a loop turn gathered go in one line, their results are stored in one transaction (WAL,
synchronous=NORMAL) on the loop's thread, then answered.

usage: python _floor_asgi.py PORT SQLITE_FILE
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

RUNNER = Path(__file__).resolve().with_name("_floor.mjs")
HEADERS = [(b"content-type", b"application/json")]


class Floor:
    def __init__(self, db_path: str) -> None:
        self.db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, result TEXT, ts INTEGER)"
        )
        self.waiting: dict[int, asyncio.Future[bytes]] = {}
        self.queued: list[list[Any]] | None = None
        self.next_id = 0
        self.stored = 0
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            "node", str(RUNNER), "runner", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=1 << 26,
        )  # fmt: skip
        asyncio.get_running_loop().create_task(self.read())

    async def read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            results = json.loads(line)
            now = int(time.time() * 1000)
            first = self.stored
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT INTO runs VALUES (?, ?, ?)",
                [(f"r{first + i}", json_text, now) for i, (_, json_text) in enumerate(results)],
            )
            self.db.execute("COMMIT")
            self.stored += len(results)
            for run_id, json_text in results:
                self.waiting.pop(run_id).set_result(json_text.encode())

    def flush(self) -> None:
        items, self.queued = self.queued, None
        assert self.proc is not None and self.proc.stdin is not None and items is not None
        self.proc.stdin.write(json.dumps(items).encode() + b"\n")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        run_id = self.next_id
        self.next_id += 1
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[run_id] = future
        if self.queued is None:
            self.queued = []
            asyncio.get_running_loop().call_soon(self.flush)
        self.queued.append([run_id, body.decode()])
        answer = await future
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": answer})


if __name__ == "__main__":
    uvicorn.run(
        Floor(sys.argv[2]), host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop",
        http="httptools", access_log=False, log_level="warning",
    )  # fmt: skip
