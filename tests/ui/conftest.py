"""The web UI in a real browser: a real ``sluice serve`` process on a fresh data folder, and
Debian's Chromium driven by Playwright (its own browser download cannot work offline, so the
system's ``/usr/bin/chromium`` is launched: ``apt-get install chromium``, which ``bin/test``
does as root)."""

from __future__ import annotations

import collections
import contextlib
import http.server
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests import zygote
from tests.conftest import CACHE, PG_URL, SKIP_PG
from tests.ports import free_port

CHROMIUM = os.environ.get("SLUICE_TEST_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery"
#: How many of a server's last log lines a failing test's report shows.
LOG_LINES = 200


@dataclass
class Server:
    url: str
    data_dir: Path
    pid: int = 0
    #: The last lines the server wrote to stderr (its log), shown with a failing test's report.
    log: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=LOG_LINES), repr=False
    )


@contextlib.contextmanager
def serve(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """``sluice serve`` on a free port; ``{port}`` in an ``extra_env`` value becomes it."""
    port = free_port()
    env = {
        **os.environ,
        "SLUICE_DATA_DIR": str(data_dir),
        "SLUICE_PORT": str(port),
        "SLUICE_NPM_STORE": str(CACHE / "npm-store"),
        # The components served by the tests' own loopback HTTP server may be fetched.
        "SLUICE_EGRESS_ALLOW": "127.0.0.1:*",
        **{k: v.replace("{port}", str(port)) for k, v in (extra_env or {}).items()},
    }
    # Forked from the test process's zygote (tests/zygote.py), with passwords hashed at
    # argon2id's lowest cost (tests/sluice_cheap_hashes.py).
    proc = zygote.popen(
        ["serve", "--host", "127.0.0.1"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cheap_hashes=True,
    )
    assert proc.stderr is not None
    server = Server(env.get("SLUICE_PUBLIC_URL") or f"http://127.0.0.1:{port}", data_dir, proc.pid)
    for line in proc.stderr:  # the server's own word that it is up
        server.log.append(line)
        if "Application startup complete" in line:
            break
    else:
        proc.stderr.close()
        proc.wait(timeout=30)  # reaped: an unreaped child fails the next test's setup
        pytest.fail("sluice serve exited:\n" + "".join(server.log))
    drain = threading.Thread(target=server.log.extend, args=(proc.stderr,), daemon=True)
    drain.start()
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        drain.join(timeout=30)
        proc.stderr.close()


_PG = """
import asyncio, sys, asyncpg
async def main(sql):
    conn = await asyncpg.connect(sys.argv[1], timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
asyncio.run(main(sys.argv[2]))
"""


def _pg(sql: str) -> None:
    # In a child process: Playwright's sync API holds this process's event loop.
    done = subprocess.run(
        [sys.executable, "-c", _PG, PG_URL, sql], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        message = f"PostgreSQL at {PG_URL} is unreachable: {done.stderr.strip()[-300:]}"
        if SKIP_PG:
            pytest.skip(message)
        pytest.fail(message + " (set SLUICE_TEST_SKIP_POSTGRES=1 to skip that half)")


@contextlib.contextmanager
def serve_on(
    dialect: str, data_dir: Path, name: str, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    """``serve`` on a fresh database of ``dialect``: SQLite in ``data_dir``, or a new
    PostgreSQL database ``name`` (dropped afterwards)."""
    env = dict(extra_env or {})
    if dialect == "postgresql":
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        _pg(f'CREATE DATABASE "{name}"')
        env["SLUICE_DATABASE_URL"] = PG_URL.rsplit("/", 1)[0] + "/" + name
    try:
        with serve(data_dir, env) as running:
            yield running
    finally:
        if dialect == "postgresql":
            _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: Names this test process's databases: random, as each pytest-xdist worker (and each
#: concurrent run on the machine) imports this module on its own.
_SESSION = secrets.token_hex(4)


def database_name(what: str) -> str:
    """A PostgreSQL database name of this test process's own."""
    return f"sluice_ui_{_SESSION}_{what}"


# Package scope: Playwright's sync API keeps an event loop marked running while it is open,
# and the asyncio tests after this package need none (Runner.run() refuses to start).
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bin/test does it as root)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server per test module; its owner account is created through the first-run page."""
    with serve(tmp_path_factory.mktemp("ui-data")) as running:
        yield running


@pytest.fixture(scope="module")
def owner_state(server: Server, browser: Browser) -> dict[str, object]:
    """The browser storage of the owner logged in (created on the first-run page)."""
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/")
    expect(page).to_have_url(f"{server.url}/setup")
    create_owner(page)
    state = context.storage_state()
    context.close()
    return dict(state)


def create_owner(page: Page, username: str = "ada") -> None:
    page.get_by_label("Username").fill(username)
    page.get_by_label("E-mail").fill(f"{username}@example.com")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create the owner account").click()
    expect(page.get_by_role("heading", name="Sources")).to_be_visible()


@pytest.fixture
def page(server: Server, browser: Browser, owner_state: dict[str, object]) -> Iterator[Page]:
    """A tab logged in as the owner; a CSP violation or a script error fails the test."""
    context = browser.new_context(base_url=server.url, storage_state=owner_state)  # type: ignore[arg-type]
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    opened.on(
        "console",
        lambda msg: (
            problems.append(msg.text)
            if msg.type == "error" and "Content Security Policy" in msg.text
            else None
        ),
    )
    yield opened
    context.close()
    assert not problems, problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report shows the log of each server it used (a fixture's): what the
    server said about the failure (a run's error, a warning) is otherwise thrown away."""
    report: pytest.TestReport = yield
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, Server):
                report.sections.append(
                    (f"sluice serve log ({name}, {value.url})", "".join(value.log.copy()))
                )
    return report


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict[str, str] = {}

    def do_GET(self) -> None:
        body = self.files.get(self.path, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def file_server() -> Iterator[tuple[str, dict[str, str]]]:
    """A loopback HTTP server of component files: ``(base url, {path: text})``."""
    files: dict[str, str] = {}
    handler = type("Files", (_Files,), {"files": files})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files
    httpd.shutdown()
    httpd.server_close()


def run_cli(
    *args: str, data_dir: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return zygote.run([*args, "--data-dir", str(data_dir)], input=stdin, check=True)
