"""Shared code for the benchmarks: a real ``sluice serve`` in a fresh data dir, accounts,
percentiles, a printed table, JSON results, and the RSS of a process tree (from /proc).

Nothing here is a benchmark by itself; see the scripts beside it.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
SLUICE = (
    REPO / ".venv" / "bin" / "sluice"
    if (REPO / ".venv" / "bin" / "sluice").exists()
    else Path(sys.executable).parent / "sluice"
)

TRIVIAL_SOURCE = (
    'export default { name: "Trivial", version: "0.0.1", async run(event) { return 1; } };\n'
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class Account:
    id: str
    api_key: str


class ApiError(RuntimeError):
    pass


@dataclass
class Server:
    """``sluice serve`` as a subprocess in its own temporary data dir.

    ``env`` adds ``SLUICE_*`` settings. Use as a context manager: it starts, waits for
    ``/openapi.json``, and on exit stops the server with SIGTERM (uvicorn's graceful
    shutdown closes the Node runners) and removes the data dir unless ``keep`` is set.
    """

    env: dict[str, str] = field(default_factory=dict)
    keep: bool = False
    start_timeout: float = 60.0
    data_dir: Path = field(init=False)
    port: int = field(init=False)
    proc: subprocess.Popen[bytes] | None = field(init=False, default=None)
    startup_seconds: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
        self.port = free_port()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        # SLUICE_SANDBOX passes through, so bench/sandbox.py can run a bench both ways.
        if "SLUICE_SANDBOX" in os.environ:
            env["SLUICE_SANDBOX"] = os.environ["SLUICE_SANDBOX"]
        env.update(self.env)
        env["SLUICE_DATA_DIR"] = str(self.data_dir)
        env.setdefault("SLUICE_LOG_LEVEL", "warning")
        return env

    def start(self) -> None:
        log = self.log_path.open("wb")
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(SLUICE), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir,
        )
        log.close()
        deadline = time.monotonic() + self.start_timeout
        with httpx.Client(base_url=self.base_url, timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"sluice serve exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    if client.get("/openapi.json").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"sluice serve not ready in time:\n{self.log_tail()}")
                time.sleep(0.05)
        self.startup_seconds = time.perf_counter() - started

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM, wait, then SIGKILL (the server and any process left in its tree)."""
        proc = self.proc
        if proc is None:
            return None
        leftovers = descendants(proc.pid) if proc.poll() is None else []
        commands = {pid: cmdline(pid) for pid in leftovers}
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                print("warning: the server did not stop in time; killing it", file=sys.stderr)
                proc.kill()
                proc.wait()
        for pid in leftovers:
            # Runners exit on EOF of stdin when the server goes; only stragglers remain.
            # (Only if the pid still runs what it ran then: pids are reused.)
            if _alive(pid) and cmdline(pid) == commands.get(pid):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return proc.returncode

    def create_account(self, name: str = "bench") -> Account:
        out = subprocess.run(
            [str(SLUICE), "accounts", "create", "--name", name, "--data-dir", str(self.data_dir)],
            env=self._env(),
            check=True,
            capture_output=True,
            text=True,
        )
        data = json.loads(out.stdout)
        return Account(data["id"], data["api_key"])

    def client(self, account: Account, timeout: float = 120.0) -> httpx.Client:
        """A keep-alive client authenticated as ``account``."""
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {account.api_key}"},
            timeout=timeout,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        code = self.stop()
        # uvicorn re-raises the SIGTERM it handled once its graceful shutdown is done.
        if code not in (0, None, -signal.SIGTERM):
            print(f"note: sluice serve exited with code {code}", file=sys.stderr)
        if not self.keep:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        else:
            print(f"data dir kept: {self.data_dir}", file=sys.stderr)


def api(client: httpx.Client, method: str, path: str, body: Any = None) -> Any:
    """One call; the ``data`` of a 2xx answer, else ``ApiError`` with the body."""
    response = client.request(method, path, json=body)
    if response.status_code >= 300:
        raise ApiError(f"{method} {path} → {response.status_code}: {response.text[:2000]}")
    return response.json().get("data")


def check_run(data: Any, expect: Any = None) -> None:
    """A /run answer must be ok (and give ``expect`` when it is not None)."""
    if not isinstance(data, dict) or not data.get("ok"):
        raise ApiError(f"run failed: {json.dumps(data)[:2000]}")
    if expect is not None and data.get("value") != expect:
        raise ApiError(f"run returned {data.get('value')!r}, expected {expect!r}")


# ---- statistics ---------------------------------------------------------------------------


def wrk_post(
    url: str,
    body: str,
    *,
    seconds: float,
    concurrency: int = 1,
    headers: dict[str, str] | None = None,
    cpu: int = 1,
) -> dict[str, Any]:
    """``wrk`` POSTing ``body`` (JSON) to ``url`` on CPU ``cpu`` for whole ``seconds``: its
    counts and latencies (requests, requests/s, non-2xx answers, socket errors, p50/p99 in ms)."""
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}"]
    lines += [
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}"
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items()
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write("\n".join(lines) + "\n")
    try:
        out = subprocess.run(
            [
                *("taskset", "-c", str(cpu), "wrk", "-t1", f"-c{concurrency}"),
                *(f"-d{max(1, round(seconds))}s", "--latency", "-s", lua.name, url),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(lua.name)

    def found(pattern: str) -> re.Match[str]:
        match = re.search(pattern, out)
        if match is None:
            raise RuntimeError(f"no {pattern!r} in wrk's output:\n{out}")
        return match

    def ms(label: str) -> float:
        m = found(rf"\n\s+{label}\s+([\d.]+)(us|ms|s)\b")
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "requests": int(found(r"(\d+) requests in").group(1)),
        "rps": float(found(r"Requests/sec:\s+([\d.]+)").group(1)),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": errors.group(1) if errors else "",
        "p50_ms": ms("50%"),
        "p99_ms": ms("99%"),
    }


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); ``p`` in 0..100."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, mean, min, p50, p90, p99, max of ``values``."""
    return {
        "n": len(values),
        "mean": sum(values) / len(values) if values else math.nan,
        "min": min(values) if values else math.nan,
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else math.nan,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table; floats with 3 decimals."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        return str(v)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    out = [line, "-" * len(line)]
    for r in text:
        out.append(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(out)


def print_ratio_table(cells: Sequence[dict[str, Any]], env: dict[str, Any]) -> dict[int, float]:
    """The cells of a Sluice-against-bare run as a table; Sluice's ratio per concurrency."""
    by = {(c["target"], c["concurrency"]): c for c in cells}
    rows: list[list[Any]] = []
    ratios: dict[int, float] = {}
    for c in cells:
        ratio = c["rps"] / by[("bare", c["concurrency"])]["rps"]
        if c["target"] == "sluice":
            ratios[c["concurrency"]] = ratio
        rows.append(
            [
                f"{c['target']} c={c['concurrency']}",
                c["requests"],
                c["rps"],
                c["latency_ms"]["p50"],
                c["latency_ms"]["p99"],
                ratio,
                c["server_cpu"],
                c["client_cpu"],
                c["refused"] + c["errors"],
            ]
        )
    print()
    print(
        f"(cpus {env['cpus']}, load at start {env['loadavg_at_start']}; "
        "latency in ms; cpu in cores)"
    )
    print()
    print(
        table(
            ["", "requests", "req/s", "p50", "p99", "vs bare", "cpu srv", "cpu cli", "non-2xx"],
            rows,
        )
    )
    return ratios


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **data}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def environment() -> dict[str, Any]:
    """What the figures were measured on."""
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    load = os.getloadavg()
    return {
        "python": sys.version.split()[0],
        "node": node.stdout.strip(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


# ---- processes and memory -----------------------------------------------------------------


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, grandchildren, …), from /proc ppids."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = _ppid(int(entry))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` in bytes (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class TreeMemory:
    server_rss: int
    runners: list[tuple[int, int, int]]  # (pid, rss, threads) of each Node runner
    others: list[tuple[int, int, str]]  # (pid, rss, cmdline) of any other descendant

    @property
    def runner_rss(self) -> int:
        return sum(r for _, r, _ in self.runners)

    @property
    def total(self) -> int:
        return self.server_rss + self.runner_rss + sum(r for _, r, _ in self.others)


def tree_memory(server_pid: int) -> TreeMemory:
    """RSS of the server and of all its descendants, Node runners apart."""
    runners: list[tuple[int, int, int]] = []
    others: list[tuple[int, int, str]] = []
    for pid in descendants(server_pid):
        cmd = cmdline(pid)
        rss = rss_bytes(pid)
        if "runner.mjs" in cmd:
            runners.append((pid, rss, threads(pid)))
        elif rss:
            others.append((pid, rss, cmd[:120]))
    return TreeMemory(rss_bytes(server_pid), runners, others)


class PeakSampler:
    """Samples ``tree_memory(pid).total`` every ``interval`` s in a thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.peak_runners = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = time.perf_counter()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        mem = tree_memory(self.pid)
        self.samples.append((round(time.perf_counter() - self._t0, 2), mem.total))
        self.peak = max(self.peak, mem.total)
        self.peak_runners = max(self.peak_runners, len(mem.runners))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def mib(n: float) -> float:
    return n / (1024 * 1024)


# ---- a fresh PostgreSQL database (benchmarks with --postgres) ---------------------------------


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def create_database(admin_url: str) -> str:
    import asyncpg

    name = f"sluice_bench_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(_plain(admin_url), timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return _plain(admin_url).rsplit("/", 1)[0] + "/" + name


async def drop_database(admin_url: str, url: str) -> None:
    import asyncpg

    name = url.rsplit("/", 1)[1]
    conn = await asyncpg.connect(_plain(admin_url), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
