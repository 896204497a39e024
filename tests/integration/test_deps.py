"""The dependency store against the real npm registry, and Node resolving through the link."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sluice.runtime.deps
from sluice.domain.imports import plan_dependencies
from sluice.errors import DependencyInstallFailed
from sluice.runtime.deps import DependencyStore

SRC_DIR = Path(sluice.runtime.deps.__file__).resolve().parents[2]
NODE = shutil.which("node")
NPM = shutil.which("npm")

# Sluice needs Node and npm: a machine without them fails here, loudly, rather than skipping.
assert NODE is not None and NPM is not None, "the tests need node and npm on PATH"

COMPONENT = {
    "actions/odd3/odd3.mjs": (
        'import isOdd from "is-odd@3.0.1";\n'
        'import pkg from "is-odd@3.0.1/package.json" with { type: "json" };\n'
        'import get from "lodash.get";\n'
        "export default {\n"
        "  odd: isOdd(3), version: pkg.version, get: get({ a: { b: 1 } }, 'a.b'),\n"
        "};\n"
    ),
    "actions/odd2/odd2.cjs": (
        'const isOdd = require("is-odd@^2");\n'
        "module.exports = {\n"
        "  odd: isOdd(3),\n"
        '  version: require("is-odd@^2/package.json").version,\n'
        '  isNumber: require("is-number")(5),\n'
        "};\n"
    ),
}


@pytest.fixture(scope="session")
def npm_cache() -> Path:
    # Shared by every store and kept between runs (like the rest of .test-cache), so a package
    # is downloaded once; the stores themselves are fresh per test.
    cache = Path(__file__).resolve().parents[2] / ".test-cache" / "npm-cache"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


class CountingNpm:
    """The real npm behind a wrapper that logs one line per run (to count installs)."""

    def __init__(self, directory: Path) -> None:
        self.log = directory / "npm-runs.log"
        self.path = directory / "npm-counting"
        self.path.write_text(f'#!/bin/sh\necho run >> "{self.log}"\nexec "{NPM}" "$@"\n')
        self.path.chmod(0o755)

    @property
    def runs(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


@pytest.fixture
def npm(tmp_path: Path) -> CountingNpm:
    return CountingNpm(tmp_path)


@pytest.fixture
def store(tmp_path: Path, npm: CountingNpm, npm_cache: Path) -> DependencyStore:
    return DependencyStore(tmp_path / "store", npm=str(npm.path), cache_dir=npm_cache)


def _left(store: DependencyStore) -> list[str]:
    """What installs left in the store besides lock files: nothing when the store's folder was
    never made (an install cancelled before its first step, on a busy machine)."""
    if not store.root.exists():
        return []
    return [p.name for p in store.root.iterdir() if not p.name.endswith(".lock")]


def node_json(script: Path, cwd: Path) -> object:
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(script)], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def write_component(directory: Path, files: dict[str, str]) -> None:
    for rel, source in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(source)


# ---------------------------------------------------------------------------- installing


@pytest.mark.npm
async def test_two_pins_of_one_package_both_resolve_through_the_link(
    store: DependencyStore, npm: CountingNpm, tmp_path: Path
) -> None:
    plan = plan_dependencies(COMPONENT)
    assert len(plan.dependencies) == 4  # is-odd, its ^2 alias, lodash.get, is-number

    started = time.perf_counter()
    store_dir = await store.ensure(plan)
    cold = time.perf_counter() - started
    assert store_dir == store.root / plan.key
    assert json.loads((store_dir / "package.json").read_text())["dependencies"] == (
        plan.dependencies
    )
    assert npm.runs == 1

    component = tmp_path / "component"
    write_component(component, plan.files)
    started = time.perf_counter()
    await store.link(store_dir, component)
    linked = time.perf_counter() - started
    assert (component / "node_modules").resolve() == (store_dir / "node_modules").resolve()

    # ESM import and CJS require, from the component's own files; is-odd requires is-number
    # itself (^6 for 3.0.1, ^4 for 2.x), so a package's own dependencies resolve too.
    driver = tmp_path / "driver.mjs"
    odd3, odd2 = (json.dumps((component / f).as_uri()) for f in COMPONENT)
    driver.write_text(
        f"const odd3 = (await import({odd3})).default;\n"
        f"const odd2 = (await import({odd2})).default;\n"
        "console.log(JSON.stringify({ odd3, odd2 }));\n"
    )
    result = node_json(driver, tmp_path)
    assert result == {
        "odd3": {"odd": True, "version": "3.0.1", "get": 1},
        "odd2": {"odd": True, "version": "2.0.0", "isNumber": True},
    }
    print(f"\ncold install {cold:.2f}s, link {linked * 1000:.2f}ms")


@pytest.mark.npm
async def test_installed_plan_is_reused_without_npm(
    store: DependencyStore, npm: CountingNpm, npm_cache: Path
) -> None:
    plan = plan_dependencies({"a.cjs": 'require("is-number@7.0.0")'})
    first = await store.ensure(plan)
    assert npm.runs == 1

    started = time.perf_counter()
    again = await store.ensure(plan)
    warm = time.perf_counter() - started
    assert again == first
    assert npm.runs == 1
    assert warm < 0.05, warm

    # Another store object on the same root (another process, a restart) reuses it too,
    # and a plain mapping of the same dependencies has the same key.
    other = DependencyStore(store.root, npm=store.npm, cache_dir=npm_cache)
    assert await other.ensure(dict(plan.dependencies)) == first
    assert npm.runs == 1
    print(f"\nwarm ensure {warm * 1e6:.0f}us")


@pytest.mark.npm
async def test_concurrent_ensures_install_once(store: DependencyStore, npm: CountingNpm) -> None:
    plan = plan_dependencies({"a.mjs": 'import n from "is-number@^7"'})
    results = await asyncio.gather(*(store.ensure(plan) for _ in range(5)))
    assert len(set(results)) == 1 and results[0] is not None
    assert npm.runs == 1
    assert sorted(p.name for p in store.root.iterdir() if not p.name.endswith(".lock")) == [
        plan.key
    ]


@pytest.mark.npm
async def test_concurrent_processes_install_once(
    store: DependencyStore, npm: CountingNpm, npm_cache: Path
) -> None:
    plan = plan_dependencies({"a.mjs": 'import n from "is-number@^6"'})
    store.root.mkdir(parents=True)
    child = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from sluice.runtime.deps import DependencyStore\n"
        "store = DependencyStore(Path(sys.argv[1]), npm=sys.argv[2], cache_dir=Path(sys.argv[3]))\n"
        "print('ready', flush=True)\n"
        "print(asyncio.run(store.ensure({'is-number': '^6'})), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    # Hold the key's lock until every child is about to ask for it, so they really contend.
    with open(store.root / f"{plan.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                child,
                str(store.root),
                store.npm,
                str(npm_cache),
                env=env,
                stdout=asyncio.subprocess.PIPE,
            )
            for _ in range(3)
        ]
        for proc in procs:
            assert proc.stdout is not None
            assert await proc.stdout.readline() == b"ready\n"
        assert npm.runs == 0
    outputs = [await proc.communicate() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0]
    assert {out.decode().strip() for out, _ in outputs} == {str(store.root / plan.key)}
    assert npm.runs == 1


@pytest.mark.npm
async def test_nonexistent_package_fails_clearly(store: DependencyStore) -> None:
    plan = plan_dependencies(
        {"a.mjs": 'import x from "nonexistent-pkg-xyz-sluice-test"; import n from "is-number"'}
    )
    with pytest.raises(DependencyInstallFailed) as info:
        await store.ensure(plan)
    message = info.value.message
    assert message.startswith("npm could not install nonexistent-pkg-xyz-sluice-test:")
    assert "E404" in message
    assert "404 Not Found - GET https://" in message
    assert "complete log" not in message
    assert info.value.details["packages"] == ["nonexistent-pkg-xyz-sluice-test"]
    assert info.value.code == "dependency_install_failed"
    # Nothing that looks like an installed entry is left behind.
    assert _left(store) == []


@pytest.mark.npm
async def test_missing_version_fails_clearly(store: DependencyStore) -> None:
    with pytest.raises(DependencyInstallFailed) as info:
        await store.ensure(plan_dependencies({"a.cjs": 'require("is-number@999.0.0")'}))
    assert "is-number@999.0.0" in info.value.message
    assert "ETARGET" in info.value.message


@pytest.mark.npm
async def test_timeout_kills_npm_and_leaves_nothing(tmp_path: Path, npm_cache: Path) -> None:
    # npm cannot even start in 10 ms, so this always expires mid-install.
    store = DependencyStore(tmp_path / "store", install_timeout=0.01, cache_dir=npm_cache)
    with pytest.raises(DependencyInstallFailed, match=r"is-number@\^7 timed out"):
        await store.ensure({"is-number": "^7"})
    assert _left(store) == []


@pytest.mark.npm
async def test_cancelled_install_leaves_nothing(store: DependencyStore) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(store.ensure({"is-number": "^7"}), 0.01)
    assert _left(store) == []


@pytest.mark.npm
async def test_cancelled_wait_for_the_file_lock_releases_it(
    store: DependencyStore, npm: CountingNpm
) -> None:
    plan = plan_dependencies({"a.cjs": 'require("is-number@7")'})
    store.root.mkdir(parents=True)
    with open(store.root / f"{plan.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as if another process were installing
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.ensure(plan), 0.05)
    # The abandoned waiter got the lock after we released it and must have let it go.
    assert await asyncio.wait_for(store.ensure(plan), 60) == store.root / plan.key
    assert npm.runs == 1


@pytest.mark.npm
async def test_leftovers_of_a_crashed_install_are_removed(
    store: DependencyStore, npm: CountingNpm
) -> None:
    plan = plan_dependencies({"a.cjs": 'require("is-number@7.0.0")'})
    crashed = store.root / f".tmp-{plan.key}-dead"
    (crashed / "node_modules" / "is-number").mkdir(parents=True)
    assert await store.ensure(plan) == store.root / plan.key
    assert not crashed.exists()
    assert npm.runs == 1


async def test_nothing_to_install(store: DependencyStore, npm: CountingNpm) -> None:
    assert await store.ensure(plan_dependencies({"a.mjs": 'import fs from "node:fs"'})) is None
    assert await store.ensure({}) is None
    assert npm.runs == 0
    assert not store.root.exists()


async def test_npm_missing_is_an_install_failure(tmp_path: Path) -> None:
    store = DependencyStore(tmp_path / "store", npm=str(tmp_path / "no-such-npm"))
    with pytest.raises(DependencyInstallFailed, match=r"Could not run npm.*is-number@1"):
        await store.ensure({"is-number": "1"})


def test_npm_gets_no_host_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("NPM_TOKEN", "npm_secret")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    store = DependencyStore(tmp_path / "store", registry="https://npm.example/")
    env = store._npm_env()
    assert "AWS_SECRET_ACCESS_KEY" not in env and "NPM_TOKEN" not in env
    assert env["HOME"].startswith(str(store.cache_dir))  # so the host's ~/.npmrc is not read
    assert env["npm_config_cache"] == str(tmp_path / "store" / ".npm-cache")
    assert env["npm_config_registry"] == "https://npm.example/"
    assert env["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert env["PATH"] == os.environ["PATH"]


# ---------------------------------------------------------------------------- linking


def fake_entry(root: Path, name: str) -> Path:
    entry = root / name
    (entry / "node_modules").mkdir(parents=True)
    return entry


async def test_link_replaces_links_and_directories(store: DependencyStore, tmp_path: Path) -> None:
    first, second = fake_entry(tmp_path, "one"), fake_entry(tmp_path, "two")
    component = tmp_path / "component"
    await store.link(first, component)
    assert os.readlink(component / "node_modules") == str(first / "node_modules")
    await store.link(second, component)
    assert os.readlink(component / "node_modules") == str(second / "node_modules")

    (component / "node_modules").unlink()
    (component / "node_modules" / "stale").mkdir(parents=True)
    await store.link(first, component)
    assert (component / "node_modules").is_symlink()
    assert [p.name for p in component.iterdir()] == ["node_modules"]


async def test_link_without_dependencies_removes_a_stale_link(
    store: DependencyStore, tmp_path: Path
) -> None:
    component = tmp_path / "component"
    await store.link(None, component)
    assert not component.exists()
    await store.link(fake_entry(tmp_path, "one"), component)
    await store.link(None, component)
    assert list(component.iterdir()) == []


# ---------------------------------------------------------------------------- a stalling registry


def _tarball() -> bytes:
    buffer = io.BytesIO()
    files = {
        "package/package.json": json.dumps({"name": "stall-pkg", "version": "1.0.0"}),
        # Large enough that half of it is a real part of a body.
        "package/index.js": "module.exports = 42;\n//" + "x" * 200_000 + "\n",
    }
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@contextlib.contextmanager
def stalling_registry(stall: str) -> Iterator[tuple[str, list[str]]]:
    """A registry on 127.0.0.1 of one package, whose first tarball request stalls: no answer at
    all (``stall`` "answer"), or headers and half the body, then nothing ("body"). Yields its
    URL and the paths asked for, in order."""
    tgz = _tarball()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    released = threading.Event()
    asked: list[str] = []

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = tgz
            if self.path not in ("/stall-pkg", "/stall-pkg/-/stall-pkg-1.0.0.tgz"):
                self.send_error(404)
                return
            if not self.path.endswith(".tgz"):
                tarball = f"{base}stall-pkg/-/stall-pkg-1.0.0.tgz"
                version = {"name": "stall-pkg", "version": "1.0.0"}
                version["dist"] = {"tarball": tarball, "integrity": integrity}  # type: ignore[assignment]
                body = json.dumps(
                    {
                        "name": "stall-pkg",
                        "dist-tags": {"latest": "1.0.0"},
                        "versions": {"1.0.0": version},
                    }
                ).encode()
            elif asked.count(self.path) == 1:
                if stall == "body":
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                released.wait(30)  # the stall; ended when the test is over
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    httpd.daemon_threads = True
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield base, asked
    finally:
        released.set()
        httpd.shutdown()
        httpd.server_close()


async def test_a_registry_request_that_gets_no_answer_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # npm's default waits 5 minutes on it, the install's whole time limit.
    with stalling_registry("answer") as (registry, asked):
        store = DependencyStore(tmp_path / "store", registry=registry, fetch_timeout=1.0)
        installed = await store.ensure({"stall-pkg": "1.0.0"})
    assert installed is not None and (installed / "node_modules/stall-pkg/index.js").is_file()
    tarball = "/stall-pkg/-/stall-pkg-1.0.0.tgz"
    assert asked.count(tarball) == 2, asked  # npm's own retry: one run of npm
    assert "run again" not in caplog.text


async def test_an_install_whose_download_stopped_midway_is_run_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # npm does not retry a body that stopped coming: it fails with EIDLETIMEOUT.
    with stalling_registry("body") as (registry, asked):
        store = DependencyStore(tmp_path / "store", registry=registry, fetch_timeout=1.0)
        installed = await store.ensure({"stall-pkg": "1.0.0"})
    assert installed is not None and (installed / "node_modules/stall-pkg/index.js").is_file()
    assert asked.count("/stall-pkg/-/stall-pkg-1.0.0.tgz") == 2, asked
    assert "failed with EIDLETIMEOUT (a network error): run again (2 of 3)" in caplog.text


async def test_an_install_failing_otherwise_is_not_run_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with stalling_registry("answer") as (registry, asked):
        store = DependencyStore(tmp_path / "store", registry=registry, fetch_timeout=1.0)
        with pytest.raises(DependencyInstallFailed, match="no-such-pkg"):
            await store.ensure({"no-such-pkg": "1.0.0"})
    assert asked == ["/no-such-pkg"], asked
    assert "run again" not in caplog.text
