"""The jail, second round (issue 25): what an account's code can do to its own runner and see
of the host. Each test is an attacker's component, deployed by an ordinary account and run
through the REST API of a real platform with the sandbox on (SQLite-only: the jail does not
depend on the dialect).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import sluice
from sluice.engine.components.components import ComponentInput
from sluice.platform import Platform
from sluice.runtime import sandbox as sandbox_rules
from sluice.runtime.pool import Invocation
from sluice.runtime.sandbox import Sandbox, SandboxConfig
from sluice.storage import tables
from tests.conftest import Api, account_client, make_settings

pytestmark = pytest.mark.skipif(
    os.environ.get("SLUICE_SANDBOX") == "off", reason="the sandbox is off in this environment"
)

#: A bound on what must answer at once, so a stalled runner fails the test instead of hanging
#: the suite (the stall measured before issue 25 was over 90 s).
_PROMPT_S = 30


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def jailed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    settings = make_settings(tmp_path_factory.mktemp("jail"), sandbox="on")
    async with Platform.open(settings, background=False) as platform:
        yield platform


@pytest_asyncio.fixture(loop_scope="session")
async def attacker(jailed: Platform) -> AsyncIterator[Api]:
    name = f"mallory-{secrets.token_hex(3)}"
    async with account_client(jailed, name, f"{name}@example.com") as a:
        yield a


async def _run(api: Api, code: str) -> dict[str, Any]:
    """Deploy ``code`` as a source of ``api``'s account and run it once by hand."""
    created = await api.client.post("/v1/sources", json={"component_code": code})
    assert created.status_code == 200, created.text
    source_id = created.json()["data"]["id"]
    async with asyncio.timeout(_PROMPT_S):
        ran = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": {}})
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


def _source(body: str) -> str:
    return (
        'import fs from "node:fs";\n'
        'export default { name: "Probe", version: "1",\n'
        "  async run(event) {\n"
        "    const tryIt = (f) => { try { return { ok: true, value: f() }; }"
        " catch (e) { return { ok: false, code: e.code ?? e.name, msg: String(e.message) }; } };\n"
        f"{body}\n"
        "  } };\n"
    )


@pytest.mark.parametrize("fd", [1, 2])
async def test_raw_writes_of_any_size_to_stdout_and_stderr_never_stall_the_runner(
    attacker: Api, fd: int
) -> None:
    """Before issue 25 one ``fs.writeSync(2, "E".repeat(1 << 20))`` blocked the account's
    runner: the runner's output reader gave up on a line over 64 KiB, the pipe filled, and the
    write (and every call after it) waited for over 90 s."""
    code = _source(
        f"for (let i = 0; i < 4; i++) fs.writeSync({fd}, 'E'.repeat(1 << 20));\n"
        f"fs.writeSync({fd}, 'line\\n'.repeat(50000));\n"
        "return 'written';"
    )
    for _ in range(3):
        result = await _run(attacker, code)
        assert result["ok"] is True and result["value"] == "written", result
    after = await _run(attacker, _source("return 'still answering';"))
    assert after["value"] == "still answering"


async def test_the_kernel_surface_seccomp_leaves_is_small(attacker: Api, jailed: Platform) -> None:
    """Before issue 25 the filter allowed ``io_uring_setup``, ``socket(AF_VSOCK)`` (a path past
    the network namespace on hosts with a vsock peer), netlink and ``personality`` changes
    (``setarch -R``: address-space randomisation off)."""
    if jailed.pool.sandbox is None or jailed.pool.sandbox.seccomp_path is None:
        pytest.fail("libseccomp is not available: the jail runs without a filter")
    perl = (
        "my %r; $r{io_uring} = syscall(425, 1, 0) < 0 ? $!+0 : 0;"
        " for my $f ([vsock => 40], [netlink => 16], [packet => 17], [unspec => 0],"
        " [inet => 2], [inet6 => 10], [unix => 1]) {"
        " $r{$f->[0]} = socket(my $s, $f->[1], $f->[0] eq 'netlink' ? 3 : 1, 0) ? 0 : $!+0 }"
        ' print join(",", map { "$_=$r{$_}" } sort keys %r);'
    )
    code = _source(
        'const cp = await import("node:child_process");\n'
        f"const perl = cp.spawnSync('/usr/bin/perl', ['-e', {perl!r}], {{ encoding: 'utf8' }});\n"
        "const setarch = cp.spawnSync('/usr/bin/setarch', ['-R', '/usr/bin/true'],"
        " { encoding: 'utf8' });\n"
        "return { perl: perl.stdout + perl.stderr, setarch: [setarch.status, setarch.stderr] };"
    )
    value = (await _run(attacker, code))["value"]
    found = dict(item.split("=") for item in value["perl"].split(","))
    enosys, eafnosupport = "38", "97"
    assert found["io_uring"] == enosys, value
    for family in ("vsock", "netlink", "packet", "unspec"):
        assert found[family] == eafnosupport, (family, value)
    for family in ("inet", "inet6", "unix"):
        assert found[family] == "0", (family, value)  # what Node and the proxy need
    status, err = value["setarch"]
    assert status != 0 and "Operation not permitted" in err, value


async def test_every_writable_filesystem_of_the_jail_has_a_size(attacker: Api) -> None:
    """Before issue 25 only /tmp had a size: / and /dev (with /dev/shm) were tmpfs without
    one, and a 256 MB runner held 1 GiB in /dev/shm. Now / and /dev are read-only and /tmp
    and /dev/shm are sized."""
    code = _source(
        "const out = {};\n"
        "for (const p of ['/x', '/run/x', '/dev/x', '/dev/shm/x', '/tmp/x'])\n"
        "  out[p] = tryIt(() => { fs.writeFileSync(p, 'x'); return 'written'; });\n"
        "out.big = tryIt(() => { const fd = fs.openSync('/dev/shm/big', 'w');\n"
        "  const mb = Buffer.alloc(1 << 20);\n"
        "  try { for (let i = 0; i < 256; i++) fs.writeSync(fd, mb); } finally {\n"
        "    fs.closeSync(fd); }\n"
        "  return 'wrote 256 MiB'; });\n"
        "fs.rmSync('/dev/shm/big', { force: true });\n"
        "out.mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\\n')\n"
        "  .filter((l) => l.includes(' - tmpfs '));\n"
        "return out;"
    )
    value = (await _run(attacker, code))["value"]
    for path in ("/x", "/run/x", "/dev/x"):
        assert value[path]["ok"] is False and value[path]["code"] in ("EROFS", "ENOENT"), value
    assert value["/tmp/x"]["ok"] and value["/dev/shm/x"]["ok"], value
    assert value["big"] == {"ok": False, "code": "ENOSPC", "msg": value["big"]["msg"]}
    for line in value["mounts"]:
        point, options = line.split()[4], line.split(" - ")[1]
        assert point in ("/tmp", "/dev/shm") or " ro," in f" {line.split()[5]},", line
        if point in ("/tmp", "/dev/shm"):
            assert "size=" in options, line


async def test_the_servers_environment_and_working_directory_are_not_in_the_jail(
    attacker: Api,
) -> None:
    """Before issue 25 the jail's PID 1 (bubblewrap) had the environment of the shell that
    joins the cgroups, with the server's working directory in PWD."""
    cwd = os.getcwd()
    code = _source(
        "const read = (p) => tryIt(() => fs.readFileSync(p, 'latin1'));\n"
        "return { environ: read('/proc/1/environ'), self: read('/proc/self/environ'),"
        " cwd: tryIt(() => fs.readlinkSync('/proc/1/cwd')) };"
    )
    value = (await _run(attacker, code))["value"]
    for name in ("environ", "self"):
        if value[name]["ok"]:
            assert cwd not in value[name]["value"], value
            assert "HOME=/root" not in value[name]["value"], value
    assert not value["cwd"]["ok"] or cwd not in value["cwd"]["value"], value


def _colliding_ids() -> tuple[str, str]:
    """Two account ids whose hashes pick the same jail uid (a birthday search: a few thousand
    ids give one), found the same way each run."""
    seen: dict[int, str] = {}
    for i in range(1_000_000):
        owner = f"u_collide{i}"
        slot = int.from_bytes(hashlib.sha256(owner.encode()).digest()[:4], "big") % (1 << 24)
        if slot in seen:
            return seen[slot], owner
        seen[slot] = owner
    raise AssertionError("no collision")


async def test_one_jail_uid_per_account_across_processes(attacker: Api, jailed: Platform) -> None:
    """Before issue 25 each process picked jail uids for itself (a hash of the account, then
    the next one free *in that process*): two accounts whose hashes meet, in two processes
    sharing the database, ran under one uid. Now the uid is stored with the account."""
    sandbox = jailed.pool.sandbox
    assert sandbox is not None
    if not sandbox.is_root:
        pytest.fail("jail uids are per account only as root (run the suite as root)")
    first, second = _colliding_ids()
    async with jailed.db.begin() as conn:
        for owner in (first, second):
            await conn.execute(
                tables.accounts.insert().values(
                    id=owner, username=owner, is_admin=False, created_at=0
                )
            )
    saved = await jailed.components.save(
        attacker.account_id,
        ComponentInput(
            code='export default { name: "Uid", version: "1", type: "action",'
            " async run() { return process.getuid(); } };"
        ),
    )
    entry = str(await jailed.components.materialize(saved))

    async def uid_in(platform: Platform, owner: str) -> int:
        result = await platform.pool.invoke(
            Invocation(
                owner_id=owner,
                worker_key=f"uid-{owner}",
                entry=entry,
                timeout_ms=20_000,
                memory_mb=64,
                call={"kind": "action", "props": {}, "db": {}, "steps": {}},
            )
        )
        assert result.ok, result.error
        return int(result.value)

    # Another process on the same database (as ``sluice serve`` twice).
    async with Platform.open(jailed.settings, background=False) as other:
        mine = await uid_in(jailed, first)
        theirs = await uid_in(other, second)
        assert mine != theirs
        assert await uid_in(other, first) == mine  # one uid per account, whichever process


async def test_bubblewraps_command_line_names_no_host_path(attacker: Api, jailed: Platform) -> None:
    """The jail's PID 1 is bubblewrap, and its command line (``/proc/1/cmdline``) held every
    bind of the jail: the sandbox's directory on the host, the account's view in it, the egress
    socket's path. Seen on the old code: ``/tmp/sluice-sandbox-…/accounts/<account>/components``
    in it. Its arguments come through a descriptor now (``--args``). What stays visible is in
    docs/runtime.md ("What the jail shows of the host")."""
    sandbox = jailed.pool.sandbox
    assert sandbox is not None and sandbox.root is not None
    code = _source(
        "const read = (p) => tryIt(() => fs.readFileSync(p, 'latin1').split('\\0').join(' '));\n"
        "return { one: read('/proc/1/cmdline'), all: fs.readdirSync('/proc')"
        ".filter((n) => /^\\d+$/.test(n)).map((n) => read(`/proc/${n}/cmdline`)) };"
    )
    value = (await _run(attacker, code))["value"]
    assert value["one"]["ok"], value
    assert "--args" in value["one"]["value"], value
    for shown in [value["one"], *value["all"]]:
        if shown["ok"]:
            assert str(sandbox.root) not in shown["value"], shown
            assert str(jailed.settings.data_dir) not in shown["value"], shown


async def test_no_host_path_is_visible_in_the_jail(attacker: Api, jailed: Platform) -> None:
    """Issue 25: "nothing of the host's paths or working directory visible in the jail". Seen
    on the old code: mountinfo named the runtime's directory in the checkout and the data
    directory's component and npm stores as mount points, and a component's own URL was its
    path in the data directory. Now they are at ``/sluice/…``, and the runtime is a copy on a
    tmpfs of the jail's (its mount's source is ``/``).

    Second round: every field of every mountinfo line. A bind's 4th field is its source's
    path within its filesystem: it showed ``/tmp/sluice-sandbox-<random>/accounts/<account
    id>/components`` (and ``…/npm``, ``…/egress/<n>.sock``), seen failing on the old code. As
    root the view is an overlay mount (layers named by relative paths) and the egress socket is
    on a tmpfs of its own: ``/components``, ``/npm``, ``/<n>.sock``. What stays visible is in
    docs/runtime.md ("What the jail shows of the host")."""
    sandbox = jailed.pool.sandbox
    assert sandbox is not None and sandbox.root is not None
    if not sandbox.is_root:
        pytest.fail("the view is hidden only as root (run the suite as root)")
    host = {
        "data dir": str(jailed.settings.data_dir),
        "npm store": str(jailed.settings.npm_store_dir),
        "checkout": str(Path(sluice.__file__).resolve().parents[2]),
        "cwd": os.getcwd(),
        "sandbox dir": str(sandbox.root),
        "sandbox dir's name": sandbox.root.name,
        "account id": attacker.account_id,
    }
    code = _source(
        "const read = (p) => tryIt(() => fs.readFileSync(p, 'latin1'));\n"
        "const link = (p) => tryIt(() => fs.readlinkSync(p));\n"
        "return { mountinfo: read('/proc/self/mountinfo'), mountinfo1: read('/proc/1/mountinfo'),"
        " cgroup: read('/proc/self/cgroup'), environ1: read('/proc/1/environ'),"
        " environ: read('/proc/self/environ'), cwd: link('/proc/self/cwd'),"
        " cwd1: link('/proc/1/cwd'), exe: link('/proc/self/exe'), url: import.meta.url,"
        " argv: process.argv, execArgv: process.execArgv, stack: new Error('here').stack };"
    )
    value = (await _run(attacker, code))["value"]
    assert value["mountinfo"]["ok"], value
    shown = json.dumps(value)
    for name, path in host.items():
        assert path not in shown, (name, path, value["mountinfo"], value["url"], value["stack"])
    lines = [line.split() for line in value["mountinfo"]["value"].splitlines()]
    mounts = {fields[4]: fields[3] for fields in lines}
    assert mounts.get("/sluice/runtime") == "/", mounts
    assert mounts.get("/sluice/components") == "/components", mounts
    assert mounts.get("/sluice/npm") == "/npm", mounts
    assert re.fullmatch(r"/\d+\.sock", mounts.get("/run/sluice/egress.sock", "")), mounts
    for fields in lines:  # whatever a field is (source, super options), none names the host's
        for name, path in host.items():
            assert all(path not in field for field in fields), (name, fields)
        assert "sluice-sandbox" not in " ".join(fields), fields
    assert value["url"].startswith("file:///sluice/components/"), value["url"]


def test_a_dead_processs_sandbox_mounts_are_removed_at_the_next_start(tmp_path: Path) -> None:
    """The egress tmpfs and the views' overlays are mounts in the host's namespace: a server
    that dies without closing its sandbox leaves them. The next start unmounts those of a dead
    process (its sandbox's directory names its pid) and removes the directory; a live
    process's are left alone."""
    if os.geteuid() != 0:
        pytest.fail("the sandbox mounts only as root (run the suite as root)")
    gone = subprocess.Popen(["true"])
    gone.wait()
    tmp = Path(tempfile.gettempdir())
    stale, live = tmp / f"sluice-sandbox-{gone.pid}-test", tmp / f"sluice-sandbox-{os.getpid()}-t"
    for root in (stale, live):
        (root / "mnt" / "1").mkdir(parents=True)
        (root / "egress").mkdir()
        mount = ["mount", "-t", "tmpfs", "-o", "size=64k", "sluice"]
        subprocess.run([*mount, root / "egress"], check=True)
        subprocess.run([*mount, root / "mnt" / "1"], check=True)
    data = tmp_path / "data"
    sandbox = Sandbox(SandboxConfig(components_dir=data / "c", npm_store_dir=data / "n"))
    try:
        sandbox.open()
        sandbox.close()
        mounts = Path("/proc/self/mountinfo").read_text()
        assert f"{stale}/" not in mounts and not stale.exists()
        assert f"{live}/egress" in mounts and f"{live}/mnt/1" in mounts
    finally:
        for point in (live / "mnt" / "1", live / "egress", stale / "mnt" / "1", stale / "egress"):
            subprocess.run(["umount", point], capture_output=True, check=False)
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)


def test_where_no_overlay_can_be_mounted_jails_start_with_plain_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel or container that refuses the view's overlay (no overlayfs, a stacking limit):
    the sandbox still opens and its jails start, their views plain binds (showing the
    sandbox's directory, with a warning). Seen failing before the fallback: the probe's jail
    raised the mount's OSError out of ``Sandbox.open``."""
    if os.geteuid() != 0:
        pytest.fail("the sandbox mounts only as root (run the suite as root)")
    real = sandbox_rules._Mounts._mount

    def no_overlay(
        mounts: sandbox_rules._Mounts,
        source: bytes,
        target: Path,
        fstype: bytes,
        flags: int,
        data: bytes,
    ) -> None:
        if fstype == b"overlay":
            raise OSError(errno.ENODEV, "no overlay on this host")
        real(mounts, source, target, fstype, flags, data)

    monkeypatch.setattr(sandbox_rules._Mounts, "_mount", no_overlay)
    data = tmp_path / "data"
    sandbox = Sandbox(SandboxConfig(components_dir=data / "c", npm_store_dir=data / "n"))
    sandbox.open()
    try:
        jail = sandbox.jail("acct-no-overlay")
        listener = socket.socket(socket.AF_UNIX)  # stands for its egress proxy
        listener.bind(str(jail.egress_socket))
        filter_fd = sandbox.open_seccomp()
        launch = sandbox.command(jail, ["/usr/bin/cat", "/proc/self/mountinfo"], filter_fd)
        fds = launch.fds if filter_fd is None else (*launch.fds, filter_fd)
        try:
            shown = subprocess.run(
                launch.argv, capture_output=True, text=True, pass_fds=fds, cwd="/", env={}
            )
        finally:
            launch.close()
            if filter_fd is not None:
                os.close(filter_fd)
            listener.close()
            sandbox.release(jail)
        assert shown.returncode == 0, shown.stderr
        assert sandbox.hides_sources is False  # decided once (the probe's jail), not per jail
        assert f"{jail.view}/components /sluice/components" in shown.stdout, shown.stdout
        assert re.search(r" /\d+\.sock /run/sluice/egress\.sock ", shown.stdout), shown.stdout
    finally:
        sandbox.close()
