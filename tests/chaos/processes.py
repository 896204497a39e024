"""Real Sluice processes and a private PostgreSQL cluster, to kill and restart under load.

Everything listens on 127.0.0.1 only; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from tests import zygote
from tests.ports import free_port

START_TIMEOUT_S = 120.0


@dataclass
class Sluice:
    """One ``sluice serve`` process of a role (forked from the test process's zygote:
    ``tests/zygote.py``); ``start`` returns once it says it is ready."""

    role: str
    env: dict[str, str]
    port: int = 0
    proc: zygote.Forked | None = None
    log: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def start(self) -> Sluice:
        env = {**self.env, "SLUICE_ROLE": self.role}
        if self.port:
            env["SLUICE_PORT"] = str(self.port)
        self.proc = zygote.popen(
            ["serve", "--host", "127.0.0.1"],
            env=env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        ready = threading.Event()
        marker = "Sluice worker ready" if self.role == "worker" else "Application startup complete"

        def read(stream: object) -> None:
            for line in stream:  # type: ignore[attr-defined]
                self.log.append(line)
                if marker in line:
                    ready.set()

        self.reader = threading.Thread(target=read, args=(self.proc.stderr,), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sluice serve --role {self.role} did not start:\n{self.tail()}")
        return self

    def tail(self) -> str:
        return "".join(self.log[-40:])

    def kill(self) -> None:
        """kill -9: no shutdown at all."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._closed()

    def _closed(self) -> None:
        """The process ended: read the rest of its output, then close the pipe."""
        if self.reader is not None:
            self.reader.join(timeout=30)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def stop(self) -> int:
        """SIGTERM, then wait for the graceful stop; its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is not None:
            self._closed()
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=30)
        self._closed()
        return code

    def node_pids(self) -> list[int]:
        """The Node runners under this process (through bubblewrap's processes)."""
        assert self.proc is not None
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            with contextlib.suppress(OSError):
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                for child in map(int, children):
                    todo.append(child)
                    with contextlib.suppress(OSError):
                        cmd = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]
                        if os.path.basename(cmd) == b"node":
                            found.append(child)
        return found


@dataclass
class Postgres:
    """A private PostgreSQL cluster in a temporary directory, owned by the ``postgres`` user
    (the server refuses to run as root), listening on 127.0.0.1 at a free port."""

    directory: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [_pg_bin(args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def init(self) -> Postgres:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run("initdb", "-D", str(self.directory / "data"), "-A", "trust", "-U", "postgres")
        return self.start()

    def start(self) -> Postgres:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        # -l: the server must not inherit our pipes (run() would wait for them to close).
        log = str(self.directory / "server.log")
        data = str(self.directory / "data")
        self._run("pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start")
        return self

    async def stored(self, source_id: str) -> tuple[list[int], dict[str, int]]:
        """The ``n`` of each event the source stored (the chaos load's request numbers), and
        the count of jobs per status, from one snapshot (``stored_sqlite`` says why)."""
        conn = await asyncpg.connect(self.url)
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                rows = await conn.fetch(
                    "SELECT payload::text AS p FROM events WHERE emitter_id = $1", source_id
                )
                states = await conn.fetch("SELECT status, count(*) AS c FROM jobs GROUP BY status")
        finally:
            await conn.close()
        return [json.loads(r["p"])["n"] for r in rows], {r["status"]: r["c"] for r in states}

    def crash(self) -> None:
        """Stop at once, as a crash would (no checkpoint); recovery runs at the next start."""
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")


def stored_sqlite(database: Path, source_id: str) -> tuple[list[int], dict[str, int]]:
    """``Postgres.stored`` for a SQLite file: the events' ``n`` and the jobs per status.

    Both from one read transaction: read one after the other, a job that commits its run
    between the two reads is "done" in the second and its event missing from the first, and
    a settled queue would look like an acknowledged request lost (the CI failure of 92619bc)."""
    conn = sqlite3.connect(database, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN")
        rows = conn.execute(
            "SELECT payload FROM events WHERE emitter_id = ?", (source_id,)
        ).fetchall()
        states = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    return [json.loads(r[0])["n"] for r in rows], {s: c for s, c in states}


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not versions:
        raise RuntimeError(f"{name} not found: the chaos tests need PostgreSQL's server binaries")
    return str(versions[-1])


@contextlib.contextmanager
def running(*processes: Sluice) -> Iterator[None]:
    try:
        yield
    finally:
        for process in processes:
            if process.proc is not None and process.proc.poll() is None:
                process.kill()
            elif process.proc is not None:
                process._closed()
