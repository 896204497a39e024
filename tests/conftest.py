"""Shared fixtures: a real platform per dialect (SQLite file, fresh PostgreSQL database), a real
Node runner pool, the ASGI app in process, and a fresh account per test.

``platform`` is shared by the tests of one process (one per dialect), and so is its job queue.
A module whose tests own the queue (count every job, drain it and expect only their own, run a
scheduler over every due timer) asks for ``empty_queue``
(``pytestmark = pytest.mark.usefixtures("empty_queue")``): each test starts with no job, timer
or webhook delivery, and its own are deleted after it. Safe because a process runs one test at
a time with the background loops off, and the module-scoped fixtures of other files are gone by
then (pytest tears them down at the module's end); not for a module whose own module-scoped
fixtures leave jobs, timers or deliveries (a deployed source's) for its tests.

Not a database per test from a template (issue 28): measured on this 2-core machine under load,
a platform on a copy costs ~0.45 s on SQLite and ~1.9 s on PostgreSQL (creating and dropping the
database ~1.5 s, the sandbox's start ~0.3 s), and made ``tests/integration/test_jobs.py`` 76 s
instead of 19 s (notes/issue-28-testdb.md).

PostgreSQL is expected at ``SLUICE_TEST_POSTGRES`` (default 127.0.0.1:5432, trust auth). When it
cannot be reached the PostgreSQL half of the suite FAILS, unless ``SLUICE_TEST_SKIP_POSTGRES=1``
says to skip it, and then the run ends with a banner saying the dialect was not tested.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio

from sluice import passwords
from sluice.api.app import serving
from sluice.config import Settings
from sluice.platform import Platform
from sluice.storage import tables
from tests import netns
from tests.sluice_cheap_hashes import CHEAP

ROOT = Path(__file__).resolve().parent.parent
#: Kept between runs (gitignored) so npm installs are warm after the first run.
CACHE = ROOT / ".test-cache"
PG_URL = os.environ.get("SLUICE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
SKIP_PG = os.environ.get("SLUICE_TEST_SKIP_POSTGRES") == "1"
_pg_problem: list[str] = []

# Passwords hashed by the tests' in-process platforms use argon2id at its lowest cost (one pass
# over 1 MiB), not the production set (0.27 s of CPU for a hash and a check: 13 of
# tests/integration/test_logins.py's 16 s were argon2), as Django's test settings do. Hashes of
# either cost verify the same way (the PHC string carries them); tests/unit/test_passwords.py
# checks the production set in a process of its own.
passwords._hasher = CHEAP


def make_settings(data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "npm_store": str(CACHE / "npm-store"),
        "secret_key": "",
        "source_timeout_seconds": 20.0,
        "action_timeout_seconds": 20.0,
        "max_runners": 8,
        # The suite runs with the sandbox on (as CI does); SLUICE_SANDBOX=off for a machine
        # without namespaces.
        "sandbox": os.environ.get("SLUICE_SANDBOX", "on"),
    }
    values.update(overrides)
    return Settings.from_env({}, **values)


async def _create_pg_database() -> str:
    name = f"sluice_test_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(PG_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return PG_URL.rsplit("/", 1)[0] + "/" + name


async def _drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    conn = await asyncpg.connect(PG_URL, timeout=5)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


class _Platforms:
    """This test process's platforms, one per dialect, each opened at its first use and closed
    at the end of the session.

    Held here rather than by the parametrized ``platform`` fixture itself: pytest tears a
    parametrized session fixture down whenever the next test has the other parameter. Run in
    one process, pytest orders the tests so that happens once; spread over pytest-xdist
    workers file by file (``--dist loadfile``), every file switches dialect, and each worker
    opened a new platform (migrations, core components loaded in Node) twice per file: 109
    set-ups of 5 s (median) in a ``-n 2`` run.
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.stack = contextlib.AsyncExitStack()
        self.opened: dict[str, Platform] = {}
        self.problems: dict[str, str] = {}

    async def get(self, dialect: str) -> Platform:
        if dialect in self.problems:
            self._unreachable(self.problems[dialect])
        if dialect not in self.opened:
            self.opened[dialect] = await self._open(dialect)
        return self.opened[dialect]

    async def _open(self, dialect: str) -> Platform:
        data_dir = self.tmp_path_factory.mktemp(f"data-{dialect}")
        database_url = ""
        if dialect == "postgresql":
            try:
                database_url = await _create_pg_database()
            except (OSError, asyncpg.PostgresError) as exc:
                message = f"PostgreSQL at {PG_URL} is unreachable: {exc}"
                _pg_problem.append(message)
                self.problems[dialect] = message
                self._unreachable(message)
            self.stack.push_async_callback(_drop_pg_database, database_url)
        settings = make_settings(data_dir, database_url=database_url)
        opened = await self.stack.enter_async_context(Platform.open(settings, background=False))
        return opened

    @staticmethod
    def _unreachable(message: str) -> None:
        if SKIP_PG:
            pytest.skip(message)
        pytest.fail(message + " (set SLUICE_TEST_SKIP_POSTGRES=1 to skip that half)")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _platforms(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[_Platforms]:
    platforms = _Platforms(tmp_path_factory)
    async with platforms.stack:
        yield platforms


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=["sqlite", "postgresql"])
async def platform(request: pytest.FixtureRequest, _platforms: _Platforms) -> Platform:
    return await _platforms.get(request.param)


@pytest_asyncio.fixture(loop_scope="session")
async def empty_queue(platform: Platform) -> AsyncIterator[None]:
    """The test's job queue, timers and webhook deliveries to itself: every one of the tests
    before it deleted, and its own deleted after it (jobs of a real kind that no later test's drain
    should run)."""
    await _empty_queue(platform)
    yield
    await _empty_queue(platform)


async def _empty_queue(platform: Platform) -> None:
    async with platform.db.begin() as conn:
        await conn.execute(tables.jobs.delete())
        await conn.execute(tables.timers.delete())
        await conn.execute(tables.deliveries.delete())


@dataclass
class Api:
    """An httpx client on the in-process app, authenticated as one fresh account."""

    client: httpx.AsyncClient
    platform: Platform
    account_id: str
    api_key: str


# ``serving(platform)``: the process's one app, with ``platform`` in each request's state.
# FastAPI analyses a route's parameters and builds its validators at an app's first request to
# it (``_IncludedRouter``): an app per platform paid that again for every route its tests called.
@contextlib.asynccontextmanager
async def account_client(
    platform: Platform, username: str, email: str | None = None, *, is_admin: bool = False
) -> AsyncIterator[Api]:
    # Usernames name one account each: fixtures made again on one platform need their own. Six
    # random bytes, not three: a worker's session makes ~1,000 accounts on a platform, and at 24
    # bits two of them share a suffix in about one run of fifty (CI saw it: "is taken").
    unique = f"{username}-{secrets.token_hex(6)}"
    account, key = await platform.create_account(unique, email, is_admin=is_admin)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(platform), raise_app_exceptions=False),
        base_url="http://sluice.test",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    ) as client:
        yield Api(client, platform, account.id, key)


@pytest_asyncio.fixture(loop_scope="session")
async def api(platform: Platform) -> AsyncIterator[Api]:
    name = f"user-{secrets.token_hex(6)}"
    # An address of its own: no two accounts share one (a login names an account by it).
    async with account_client(platform, name, f"u-{name}@example.com") as a:
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def other_api(platform: Platform) -> AsyncIterator[Api]:
    """A second account on the same platform, for isolation tests."""
    async with account_client(platform, "someone-else") as a:
        yield a


#: The order the suite's directories are run in. Spread over processes file by file
#: (``-n 2 --dist loadfile``), a file goes to whichever process is free, in this order: the
#: files of few, long tests (the Node runner's own tests, a server, a browser, npm installs:
#: js, e2e, ui, chaos) first, and the many short ones last, so the run does not end on one process busy with a long file while
#: the other has nothing left. pytest-xdist's own order (``--no-loadscope-reorder`` turns it
#: off: pyproject.toml) is the most tests first, which put the registry import (3 tests,
#: 65 s with npm cold) and the API's conformance run (1 test) at the very end.
_ORDER = ("js", "e2e", "ui", "chaos", "security", "integration", "unit")


def _rank(item: pytest.Item) -> int:
    parts = Path(item.nodeid.split("::", 1)[0]).parts
    where = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return _ORDER.index(where) if where in _ORDER else len(_ORDER)


#: The run's network namespace (tests/netns.py), made by the process that started pytest.
_netns: list[netns.Netns] = []


def pytest_configure(config: pytest.Config) -> None:
    """Before any test (and before pytest-xdist starts its workers, which inherit the
    environment): the egress tests' namespace, so that making it disturbs no browser."""
    if hasattr(config, "workerinput") or os.environ.get(netns.ENV):
        return  # a worker, or a pytest inside a run that made one
    made = netns.create()
    if isinstance(made, str):
        os.environ[netns.ENV] = "!" + made
        return
    _netns.append(made)
    os.environ[netns.ENV] = made.encode()


def pytest_unconfigure(config: pytest.Config) -> None:
    while _netns:
        netns.delete(_netns.pop())
    if not hasattr(config, "workerinput"):
        os.environ.pop(netns.ENV, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: each file's tests stay in their order


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _pg_problem:
        terminalreporter.write_sep("!", "PostgreSQL NOT TESTED", red=True, bold=True)
        terminalreporter.write_line(_pg_problem[0], red=True)
