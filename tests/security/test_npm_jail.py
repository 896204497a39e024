"""npm installs run in a jail of their own (issue 25): npm ran as the server's user (root),
on the host, with the host's network.

Installs pass ``--ignore-scripts``, so a package's install script does not run; what runs in
the install process is npm itself on attacker-chosen tarballs and manifests. To show what code
there could do, ``EVIL_NPM`` stands in for npm (the store's ``npm`` setting): it reads a
secret of the data directory, writes outside its directory, connects to a loopback service
directly and through the proxy npm is given, and reports its uid. Seen on the old code (no
jail): uid 0, the secret read, the host file written, the loopback service reached.
The second test installs a real package from the real registry through the jail.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from sluice.errors import DependencyInstallFailed, NpmQuotaExceeded
from sluice.runtime.deps import DependencyStore
from sluice.runtime.npm_jail import NpmJail
from sluice.runtime.packages import PackageFetcher
from sluice.runtime.sandbox import Sandbox, SandboxConfig

ACCOUNT_UID = 1_000_000_000 + 4242

#: Stands for code running in the install process; reports what it could do.
EVIL_NPM = """#!/usr/bin/env node
const fs = require("node:fs");
const net = require("node:net");
const report = { uid: process.getuid() };
try { report.secret = fs.readFileSync(SECRET, "utf8"); } catch (e) { report.secret = e.code; }
try { fs.writeFileSync(OUTSIDE, "escaped"); report.wrote = true; } catch (e) { report.wrote = e.code; }
const proxy = process.env.npm_config_https_proxy;
function tryConnect(port, host, first) {
  return new Promise((done) => {
    const s = net.connect(port, host, () => { if (first) s.write(first); });
    s.setTimeout(5000, () => { s.destroy(); done("timeout"); });
    let got = "";
    s.on("data", (d) => { got += d; });
    s.on("error", (e) => done(e.code));
    s.on("close", () => done(got.split("\\r\\n")[0] || "closed"));
  });
}
(async () => {
  report.direct = await tryConnect(PORT, "127.0.0.1", "hello\\n");
  if (proxy) {
    const u = new URL(proxy);
    report.proxied = await tryConnect(Number(u.port), u.hostname,
      `CONNECT 127.0.0.1:${PORT} HTTP/1.1\\r\\nHost: 127.0.0.1:${PORT}\\r\\n\\r\\n`);
  }
  fs.mkdirSync("node_modules/is-odd", { recursive: true });
  fs.writeFileSync("node_modules/is-odd/package.json", '{"name":"is-odd","version":"3.0.1"}');
  fs.writeFileSync("node_modules/report.json", JSON.stringify(report));
  if (HANG) setInterval(() => {}, 1000);
})();
"""


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "secret.key").write_text("the-secret")
    (data / "secret.key").chmod(0o600)
    return data


@pytest_asyncio.fixture
async def sandbox(data_dir: Path) -> AsyncIterator[Sandbox]:
    sandbox = Sandbox(
        SandboxConfig(components_dir=data_dir / "components", npm_store_dir=data_dir / "store")
    )
    await asyncio.to_thread(sandbox.open)
    try:
        yield sandbox
    finally:
        sandbox.close()


@pytest.fixture
def evil_npm() -> Iterator[Path]:
    # A directory every uid can read, as an npm installed in /opt would be.
    home = Path(tempfile.mkdtemp(prefix="sluice-evil-npm-"))
    home.chmod(0o755)
    yield home / "npm"
    shutil.rmtree(home, ignore_errors=True)


class Listener:
    """A loopback TCP service: counts who reached it."""

    def __init__(self) -> None:
        self.reached = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reached += 1
        writer.close()


def _store(
    data_dir: Path, sandbox: Sandbox | None, npm: Path | str, **kw: float
) -> DependencyStore:
    async def uid_of(owner_id: str) -> int:
        assert owner_id == "acct-evil"
        return ACCOUNT_UID

    jail = None
    if sandbox is not None:
        jail = NpmJail(sandbox, uid_of=uid_of, registry="https://registry.npmjs.org/")
    return DependencyStore(data_dir / "store", npm=str(npm), jail=jail, **kw)  # type: ignore[arg-type]


async def test_code_in_the_install_process_cannot_touch_the_host(
    data_dir: Path, sandbox: Sandbox, evil_npm: Path
) -> None:
    listener = Listener()
    server = await asyncio.start_server(listener.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    outside = Path(tempfile.gettempdir()) / f"sluice-npm-escape-{secrets.token_hex(4)}"
    evil_npm.write_text(
        EVIL_NPM.replace("SECRET", json.dumps(str(data_dir / "secret.key")))
        .replace("OUTSIDE", json.dumps(str(outside)))
        .replace("PORT", str(port))
        .replace("HANG", "false")
    )
    evil_npm.chmod(0o755)
    try:
        async with server:
            store = _store(data_dir, sandbox, evil_npm)
            entry = await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    finally:
        escaped = outside.exists()
        outside.unlink(missing_ok=True)
    assert entry is not None
    report = json.loads((entry / "node_modules" / "report.json").read_text())
    assert report["uid"] != 0, report
    assert report["secret"] == "ENOENT", report  # the data directory is not in the jail
    assert report["wrote"] is True and not escaped  # the jail's own /tmp, not the host's
    assert report["direct"] == "ECONNREFUSED", report  # no network but the jail's lo
    assert report["proxied"].startswith("HTTP/1.1 403"), report  # the registry only
    assert listener.reached == 0
    # What npm wrote is the server's once in the store: no file stays the account uid's.
    owners = {p.lstat().st_uid for p in [entry, *entry.rglob("*")]}
    assert owners == {os.geteuid()}
    assert not (entry / ".npm-cache").exists() and not (entry / ".home").exists()


async def test_a_hanging_install_is_killed_at_its_time_limit(
    data_dir: Path, sandbox: Sandbox, evil_npm: Path
) -> None:
    evil_npm.write_text(
        EVIL_NPM.replace("SECRET", '"/nonexistent"')
        .replace("OUTSIDE", '"/tmp/x"')
        .replace("PORT", "9")
        .replace("HANG", "true")
    )
    evil_npm.chmod(0o755)
    store = _store(data_dir, sandbox, evil_npm, install_timeout=1.0)
    with pytest.raises(DependencyInstallFailed, match="timed out after 1 s"):
        await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    assert not list((data_dir / "store").glob(".tmp-*"))


async def test_a_real_package_installs_through_the_jail(data_dir: Path, sandbox: Sandbox) -> None:
    npm = shutil.which("npm")
    assert npm is not None
    store = _store(data_dir, sandbox, npm)
    # lodash: 1.4 MB, more than a pipe's buffer. The result comes back as a tar stream on a
    # pipe; seen failing on its first version (is-odd alone passed): Node, the jail's egress
    # forwarder, made the pipe non-blocking and tar gave up on the first full pipe ("tar: -:
    # Wrote only 4096 of 10240 bytes").
    entry = await store.ensure({"is-odd": "3.0.1", "lodash": "4.17.21"}, "acct-evil")
    assert entry is not None
    manifest = json.loads((entry / "node_modules" / "is-odd" / "package.json").read_text())
    assert manifest["version"] == "3.0.1"
    lodash = entry / "node_modules" / "lodash"
    assert json.loads((lodash / "package.json").read_text())["version"] == "4.17.21"
    assert (lodash / "lodash.js").stat().st_size > 500_000
    assert (entry / "node_modules" / "is-number" / "package.json").is_file()
    assert {p.lstat().st_uid for p in [entry, *entry.rglob("*")]} == {os.geteuid()}


#: Stands for an install that writes more than it may (a huge package, a hostile tarball).
FILLING_NPM = """#!/usr/bin/env node
const fs = require("node:fs");
const mb = Buffer.alloc(1 << 20, 120);
let wrote = 0;
try {
  fs.mkdirSync("node_modules/big", { recursive: true });
  const fd = fs.openSync("node_modules/big/blob", "w");
  for (let i = 0; i < 64; i++) {
    fs.writeSync(fd, mb);
    wrote += mb.length;
    process.stderr.write(`wrote ${wrote}\n`); // synchronous on a pipe: kept if it is killed
  }
  fs.closeSync(fd);
} catch (e) {
  process.stderr.write(`npm error code ${e.code}\\nwrote ${wrote}\\n`);
  process.exit(1);
}
process.stderr.write(`npm error wrote ${wrote}\\n`);
process.exit(1);
"""


def _wrote(details: dict[str, object]) -> int:
    """The last count the stand-in reported: it reports after every MiB, so an install killed
    by the server's watcher (it measures every ``WATCH_S``) still says how far it got."""
    return int(str(details.get("stderr", "")).split("wrote ")[-1].split()[0])


async def test_an_install_cannot_write_more_than_the_quota_left(
    data_dir: Path, sandbox: Sandbox, evil_npm: Path
) -> None:
    """Issue 25: disk use during an npm install was unbounded (the quota was checked once npm
    had written everything to the host's disk). Seen on the old code: the stand-in wrote all
    64 MiB to the host and the install failed with a generic npm error."""
    evil_npm.write_text(FILLING_NPM)
    evil_npm.chmod(0o755)
    store = _store(data_dir, sandbox, evil_npm, quota_bytes=4 << 20)
    with pytest.raises(NpmQuotaExceeded, match="left of this account's npm quota") as caught:
        await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    assert _wrote(caught.value.details) <= 4 << 20, caught.value.details
    assert caught.value.details["limit_bytes"] == 4 << 20
    assert not [p for p in (data_dir / "store").iterdir() if p.is_dir() and p.name != ".owners"]
    assert await store.owner_bytes("acct-evil") == 0


async def test_an_install_cannot_write_more_than_a_third_of_its_memory(
    data_dir: Path, evil_npm: Path
) -> None:
    """Without a quota (or with more left than that), the bound is a third of the install's
    memory limit: its tmpfs pages are memory. Seen on the old code: all 64 MiB written."""
    sandbox = Sandbox(
        SandboxConfig(
            components_dir=data_dir / "components", npm_store_dir=data_dir / "store", memory_mb=96
        )
    )
    await asyncio.to_thread(sandbox.open)
    evil_npm.write_text(FILLING_NPM)
    evil_npm.chmod(0o755)
    try:
        store = _store(data_dir, sandbox, evil_npm)
        with pytest.raises(DependencyInstallFailed, match="the most one npm install may use") as e:
            await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    finally:
        sandbox.close()
    assert _wrote(e.value.details) <= 32 << 20, e.value.details
    assert not list((data_dir / "store").glob(".tmp-*"))


#: Stands for an install that writes many files at a pace, into its directory and into the
#: npm cache it is given (200 files of 1 MiB at most, one every 10 ms: bounded).
PACED_NPM = """#!/usr/bin/env node
const fs = require("node:fs");
const mb = Buffer.alloc(1 << 20, 120);
const cache = process.env.npm_config_cache;
fs.mkdirSync("node_modules/big", { recursive: true });
fs.mkdirSync(cache, { recursive: true });
let n = 0;
const timer = setInterval(() => {
  fs.writeFileSync(`${n % 2 ? cache : "node_modules/big"}/f${n}`, mb);
  n += 1;
  process.stderr.write(`npm error wrote ${n << 20}\\n`);
  if (n === 200) { clearInterval(timer); process.exit(1); }
}, 10);
"""


async def test_without_the_sandbox_an_install_cannot_write_past_the_quota(
    data_dir: Path, evil_npm: Path
) -> None:
    """Issue 25: with ``SLUICE_SANDBOX=off`` npm ran as the server's user with nothing but
    its time limit: one file of any size, or any number of files, in its directory and in the
    shared npm cache (counted nowhere); the quota was checked once npm had finished. Seen on
    the old code: the stand-in wrote its 64 MiB file whole, and the install failed with a
    generic npm error. Now a file stops at the room left (``RLIMIT_FSIZE``)."""
    evil_npm.write_text(FILLING_NPM)
    evil_npm.chmod(0o755)
    store = _store(data_dir, None, evil_npm, quota_bytes=4 << 20)
    with pytest.raises(NpmQuotaExceeded, match="left of this account's npm quota") as caught:
        await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    assert _wrote(caught.value.details) <= 4 << 20, caught.value.details
    assert not [p for p in (data_dir / "store").iterdir() if p.is_dir() and p.name != ".owners"]
    assert await store.owner_bytes("acct-evil") == 0


async def test_without_the_sandbox_many_files_and_the_npm_cache_count(
    data_dir: Path, evil_npm: Path
) -> None:
    """Many files, half of them in npm's cache: the install is killed once its directory and
    its own cache pass the room (measured every ``WATCH_S``), and neither is kept. Seen on the
    old code: all 200 MiB written (100 MiB of it to the shared cache, kept), a generic npm
    error."""
    evil_npm.write_text(PACED_NPM)
    evil_npm.chmod(0o755)
    store = _store(data_dir, None, evil_npm, quota_bytes=8 << 20)
    with pytest.raises(NpmQuotaExceeded, match="left of this account's npm quota") as caught:
        await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    stderr = str(caught.value.details["stderr"])
    wrote = int(stderr.split("wrote ")[-1].split()[0])
    # The room, plus what 100 files a second write in one interval and one measure: far
    # below the 200 MiB it would write.
    assert wrote <= 48 << 20, wrote
    assert not [p for p in (data_dir / "store").iterdir() if p.is_dir() and p.name != ".owners"]


async def test_without_the_sandbox_a_hanging_install_is_killed_at_its_time_limit(
    data_dir: Path, evil_npm: Path
) -> None:
    """The time limit holds with the quota's ``prlimit`` in front of npm (npm is its process)."""
    evil_npm.write_text(
        EVIL_NPM.replace("SECRET", '"/nonexistent"')
        .replace("OUTSIDE", '"/nonexistent/x"')
        .replace("PORT", "9")
        .replace("HANG", "true")
    )
    evil_npm.chmod(0o755)
    store = _store(data_dir, None, evil_npm, install_timeout=1.0, quota_bytes=4 << 20)
    with pytest.raises(DependencyInstallFailed, match="timed out after 1 s"):
        await store.ensure({"is-odd": "3.0.1"}, "acct-evil")
    assert not [p for p in (data_dir / "store").iterdir() if p.is_dir() and p.name != ".owners"]


#: Stands for ``npm pack`` (``sluice registry import``); reports what it could do, in the
#: package it packs.
EVIL_PACK = """#!/usr/bin/env node
const fs = require("node:fs");
const { execFileSync } = require("node:child_process");
const report = { uid: process.getuid(), cwd: process.cwd() };
try { report.secret = fs.readFileSync(SECRET, "utf8"); } catch (e) { report.secret = e.code; }
try { fs.writeFileSync(OUTSIDE, "escaped"); report.wrote = true; } catch (e) { report.wrote = e.code; }
const args = process.argv.slice(2);
const at = args.indexOf("--pack-destination");
const dest = at >= 0 ? args[at + 1] : process.cwd();
const work = fs.mkdtempSync("/tmp/pack-");
fs.mkdirSync(`${work}/package`);
fs.writeFileSync(`${work}/package/package.json`,
  JSON.stringify({ name: "@pipedream/evil", version: "1.0.0", report }));
execFileSync("tar", ["-czf", `${dest}/pipedream-evil-1.0.0.tgz`, "-C", work, "package"]);
if (args.includes("--json")) {  // as npm answers (the old code read it)
  const filename = "pipedream-evil-1.0.0.tgz";
  process.stdout.write(JSON.stringify([{ name: "@pipedream/evil", version: "1.0.0", filename }]));
}
"""


async def test_npm_pack_for_registry_imports_runs_in_the_jail(
    data_dir: Path, sandbox: Sandbox, evil_npm: Path
) -> None:
    """``sluice registry import`` fetched packages with ``npm pack`` as the server's user
    (root), on the host. Seen on the old code: uid 0, the data directory's secret read, a file
    written in the host's /tmp."""
    outside = Path(tempfile.gettempdir()) / f"sluice-pack-escape-{secrets.token_hex(4)}"
    evil_npm.write_text(
        EVIL_PACK.replace("SECRET", json.dumps(str(data_dir / "secret.key"))).replace(
            "OUTSIDE", json.dumps(str(outside))
        )
    )
    evil_npm.chmod(0o755)
    try:
        fetcher = PackageFetcher(data_dir / "packages", _store(data_dir, sandbox, evil_npm))
        package = await fetcher.fetch("@pipedream/evil@1.0.0")
    finally:
        escaped = outside.exists()
        outside.unlink(missing_ok=True)
    assert (package.name, package.version) == ("@pipedream/evil", "1.0.0")
    report = json.loads(package.files["package.json"])["report"]
    assert report["uid"] != 0, report
    assert report["secret"] == "ENOENT", report
    assert report["wrote"] is True and not escaped, report
    assert report["cwd"] == "/install", report
    unpacked = data_dir / "packages" / "@pipedream+evil@1.0.0"
    assert {p.lstat().st_uid for p in [unpacked, *unpacked.rglob("*")]} == {os.geteuid()}
