"""The attack suite for the runner sandbox (issue 10): each test is an attacker's component,
deployed by an ordinary account and run through the REST API of a real platform with the
sandbox on. Every attack here succeeded before the sandbox; each must now be contained.

The platform is SQLite-only (the jail does not depend on the dialect) with a small memory
limit so the memory attack is cheap. Network probes go only to loopback servers this module
starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.platform import Platform
from sluice.runtime.sandbox import JAIL_COMPONENTS, JAIL_RUNTIME, JS_DIR
from tests.conftest import Api, account_client, make_settings
from tests.ports import free_port

pytestmark = pytest.mark.skipif(
    os.environ.get("SLUICE_SANDBOX") == "off", reason="the sandbox is off in this environment"
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def allowed() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A loopback HTTP server the operator allow-listed (SLUICE_EGRESS_ALLOW), and its hits."""
    hits: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hits.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nallowed")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, family=socket.AF_INET)
    try:
        yield server.sockets[0].getsockname()[1], hits
    finally:
        server.close()
        await server.wait_closed()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def jailed(
    tmp_path_factory: pytest.TempPathFactory, allowed: tuple[int, list[bytes]]
) -> AsyncIterator[Platform]:
    data_dir = tmp_path_factory.mktemp("jailed")
    settings = make_settings(
        data_dir,
        runner_memory_mb=320,
        memory_mb=64,
        sandbox="on",
        egress_allow=f"127.0.0.1:{allowed[0]}",
    )
    async with Platform.open(settings, background=False) as platform:
        yield platform


@pytest_asyncio.fixture(loop_scope="session")
async def attacker(jailed: Platform) -> AsyncIterator[Api]:
    name = f"mallory-{secrets.token_hex(3)}"
    async with account_client(jailed, name, f"{name}@example.com") as a:
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def victim(jailed: Platform) -> AsyncIterator[Api]:
    name = f"alice-{secrets.token_hex(3)}"
    async with account_client(jailed, name, f"{name}@example.com") as a:
        yield a


async def _run(api: Api, code: str, event: Any = None) -> dict[str, Any]:
    """Deploy ``code`` as a source of ``api``'s account and run it once by hand."""
    created = await api.client.post("/v1/sources", json={"component_code": code})
    assert created.status_code == 200, created.text
    source_id = created.json()["data"]["id"]
    ran = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": event or {}})
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


def _source(body: str) -> str:
    return (
        'import fs from "node:fs";\nimport cp from "node:child_process";\n'
        'import net from "node:net";\n'
        'export default { name: "Probe", version: "1",\n'
        "  async run(event) {\n"
        "    const tryIt = (f) => { try { return { ok: true, value: f() }; }"
        " catch (e) { return { ok: false, code: e.code ?? e.name, msg: String(e.message) }; } };\n"
        f"{body}\n"
        "  } };\n"
    )


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                out.extend(int(k) for k in kids)
                todo.extend(int(k) for k in kids)
    return out


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


async def test_the_data_dir_and_its_secrets_are_not_there(attacker: Api, jailed: Platform) -> None:
    data = jailed.settings.data_dir
    paths = [
        str(data / "secret.key"),
        str(data / "sluice.db"),
        str(data),
        str(jailed.settings.components_dir),
    ]
    code = _source(
        f"const paths = {paths!r};\n"
        "return paths.map((p) => tryIt(() => fs.readFileSync(p, 'latin1').slice(0, 40)));"
    )
    result = await _run(attacker, code)
    key, db, data_dir, components = result["value"]
    assert key == {"ok": False, "code": "ENOENT", "msg": key["msg"]}
    assert db["ok"] is False and db["code"] == "ENOENT"
    # The data directory does not exist in the jail; the component store holds only this
    # account's own trees (reading a directory as a file is EISDIR, never its content).
    assert data_dir["ok"] is False and data_dir["code"] in ("ENOENT", "EISDIR")
    assert components["ok"] is False


async def test_another_accounts_component_files_are_invisible(
    attacker: Api, victim: Api, jailed: Platform
) -> None:
    secret = f"victim-secret-{secrets.token_hex(4)}"
    victim_code = (
        f'export default {{ name: "Mine", version: "1", async run() {{ return "{secret}"; }} }};'
    )
    assert (await _run(victim, victim_code))["value"] == secret
    store = JAIL_COMPONENTS  # the account's view of the component store
    code = _source(
        f"const store = {store!r};\n"
        "const found = [];\n"
        "const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) {\n"
        "  const p = `${d}/${e.name}`;\n"
        "  if (e.isDirectory() && e.name !== 'node_modules') walk(p);\n"
        "  else if (e.isFile()) found.push(fs.readFileSync(p, 'utf8')); } };\n"
        "walk(store);\n"
        "return found.join('\\n');"
    )
    seen = (await _run(attacker, code))["value"]
    assert 'name: "Probe"' in seen  # it does see its own component
    assert secret not in seen


async def test_code_and_dependencies_are_read_only(
    attacker: Api, victim: Api, jailed: Platform
) -> None:
    worker = JS_DIR / "worker.mjs"
    before = worker.read_bytes()
    code = _source(
        f"const targets = ['{JAIL_RUNTIME}/worker.mjs', import.meta.url.replace('file://', '')];\n"
        "return targets.map((p) => tryIt(() => fs.appendFileSync(p, '\\n// pwned')));"
    )
    results = (await _run(attacker, code))["value"]
    # Read-only mounts (EROFS), and files of another uid (EACCES) as root: either way, no write.
    assert all(r["ok"] is False and r["code"] in ("EROFS", "EACCES") for r in results), results
    assert worker.read_bytes() == before
    for entry in jailed.settings.components_dir.rglob("*.mjs"):
        assert not entry.read_bytes().endswith(b"// pwned")


async def test_no_host_processes_environment_or_server(attacker: Api) -> None:
    server = os.getpid()
    code = _source(
        f"const server = {server};\n"
        "const pids = fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n)).map(Number);\n"
        "return {\n"
        "  env: { ...process.env },\n"
        "  pids,\n"
        "  environ: tryIt(() => fs.readFileSync(`/proc/${server}/environ`, 'latin1')),\n"
        "  stop: tryIt(() => process.kill(server, 'SIGSTOP')),\n"
        "  term: tryIt(() => process.kill(server, 'SIGTERM')),\n"
        "  init: tryIt(() => fs.readFileSync('/proc/1/environ', 'latin1')),\n"
        "  id: tryIt(() => cp.execFileSync('/usr/bin/id', ['-u']).toString().trim()),\n"
        "};"
    )
    value = (await _run(attacker, code))["value"]
    assert set(value["env"]) <= {"PD_COMPONENT"}
    # Its own PID namespace: the jail's init (1), the runner and the probe's `id`, if alive.
    assert all(pid < 10 for pid in value["pids"]), value["pids"]
    assert value["environ"]["ok"] is False
    assert value["stop"]["ok"] is False and value["stop"]["code"] == "ESRCH"
    assert value["term"]["ok"] is False and value["term"]["code"] == "ESRCH"
    assert value["init"]["ok"] is False or "SLUICE" not in value["init"]["value"]
    # child_process works, inside the jail only.
    assert value["id"]["ok"] is True


async def test_each_account_runs_under_its_own_unprivileged_uid(
    attacker: Api, victim: Api, jailed: Platform
) -> None:
    if os.geteuid() != 0:
        pytest.skip("distinct uids per account need root (namespaces alone otherwise)")
    code = 'export default { name: "Pid", version: "1", async run() { return 1; } };'
    uids = []
    for api in (attacker, victim):
        await _run(api, code)
        runner = jailed.pool.runner(api.account_id)
        assert runner is not None and runner.pid is not None
        node = [p for p in _descendants(runner.pid) if b"node" in _cmdline(p)]
        assert node, "no node process under the runner"
        uids.append(_uid(node[-1]))
    assert 0 not in uids and uids[0] != uids[1]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def test_child_processes_die_with_their_invocation(attacker: Api, jailed: Platform) -> None:
    code = _source(
        "if (event.spawn) {\n"
        "  for (let i = 0; i < 20; i++) cp.spawn('/usr/bin/sleep', ['600'], "
        "{ detached: true, stdio: 'ignore' }).unref();\n"
        "  return 'spawned';\n"
        "}\n"
        "// Killed children may linger as zombies until reaped: count the living only.\n"
        "const alive = (n) => !/^\\d+ \\(.*\\) Z/.test(tryIt(() => "
        "fs.readFileSync(`/proc/${n}/stat`, 'utf8')).value ?? '0 (x) Z');\n"
        "return fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n) && alive(n)).map(Number);"
    )
    created = await attacker.client.post("/v1/sources", json={"component_code": code})
    source_id = created.json()["data"]["id"]
    first = await attacker.client.post(
        f"/v1/sources/{source_id}/run", json={"event": {"spawn": True}}
    )
    assert first.json()["data"]["value"] == "spawned"
    second = await attacker.client.post(f"/v1/sources/{source_id}/run", json={"event": {}})
    pids = second.json()["data"]["value"]
    assert len(pids) <= 2, pids  # the jail's init and the runner: no sleeper survived
    runner = jailed.pool.runner(attacker.account_id)
    assert runner is not None and runner.pid is not None
    assert not [p for p in _descendants(runner.pid) if b"sleep" in _cmdline(p)]


async def test_memory_is_limited_for_the_whole_process(attacker: Api, victim: Api) -> None:
    # Off-heap: Buffer memory is not covered by V8's heap limit; the jail's limit covers it.
    hog = _source(
        "const chunks = [];\n"
        "for (let i = 0; i < 64; i++) chunks.push(Buffer.alloc(64 * 1024 * 1024, 1));\n"
        "return chunks.length;"
    )
    created = await attacker.client.post("/v1/sources", json={"component_code": hog})
    source_id = created.json()["data"]["id"]
    ran = await attacker.client.post(f"/v1/sources/{source_id}/run", json={})
    body = ran.json()
    error = body.get("error") or (body.get("data") or {}).get("error")
    assert error is not None, body
    assert "OUT_OF_MEMORY" in str(error), error
    # The attacker's next run and another account are unaffected.
    ok = 'export default { name: "Ok", version: "1", async run() { return "fine"; } };'
    assert (await _run(victim, ok))["value"] == "fine"
    assert (await _run(attacker, ok))["value"] == "fine"


async def test_user_code_cannot_reach_this_hosts_services(attacker: Api) -> None:
    hits: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hits.append(await reader.read(100))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, family=socket.AF_INET)
    port = server.sockets[0].getsockname()[1]
    try:
        code = _source(
            f"const port = {port};\n"
            "const raw = await new Promise((resolve) => {\n"
            "  const s = net.connect(port, '127.0.0.1');\n"
            "  s.on('connect', () => { s.destroy(); resolve('connected'); });\n"
            "  s.on('error', (e) => resolve(e.code)); });\n"
            "let fetched;\n"
            "try { fetched = (await fetch(`http://127.0.0.1:${port}/`)).status; }"
            " catch (e) { fetched = String(e.cause?.code ?? e.message); }\n"
            "return { raw, fetched };"
        )
        value = (await _run(attacker, code))["value"]
    finally:
        server.close()
        await server.wait_closed()
    assert value["raw"] != "connected", value
    assert value["fetched"] != 200, value
    assert hits == []


async def test_namespace_and_kernel_attack_surface_is_filtered(
    attacker: Api, jailed: Platform
) -> None:
    """The seccomp filter: no new user namespace (the first step of most container escapes),
    no mounts; ordinary child processes still work."""
    if jailed.pool.sandbox is None or jailed.pool.sandbox.seccomp_path is None:
        pytest.skip("libseccomp is not available: the jail runs without a filter")
    code = _source(
        "const run = (cmd, args) => { const r = cp.spawnSync(cmd, args, { encoding: 'utf8' });\n"
        "  return { status: r.status, err: (r.stderr || '').trim().slice(0, 200) }; };\n"
        "return {\n"
        "  userns: run('/usr/bin/unshare', ['--user', '/usr/bin/true']),\n"
        "  netns: run('/usr/bin/unshare', ['--user', '--net', '/usr/bin/true']),\n"
        "  plain: run('/usr/bin/true', []),\n"
        "};"
    )
    value = (await _run(attacker, code))["value"]
    assert value["plain"]["status"] == 0
    # Without the filter `unshare --user` succeeds in the jail (nested user namespaces).
    for name in ("userns", "netns"):
        assert value[name]["status"] != 0, value
        assert "unshare failed: Operation not permitted" in value[name]["err"], value


async def test_egress_goes_through_the_proxy_only_where_allowed(
    attacker: Api, allowed: tuple[int, list[bytes]]
) -> None:
    """http, https and fetch() leave the jail through the account's egress proxy: an
    allow-listed loopback server is reached, the same host on another port is refused."""
    port, hits = allowed
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    other = closed.getsockname()[1]
    closed.close()
    code = _source(
        'const http = await import("node:http");\n'
        f"const port = {port}, other = {other};\n"
        "const viaFetch = async (p) => { try { const r = await fetch(`http://127.0.0.1:${p}/f`);"
        " return [r.status, await r.text()]; } catch (e) { return [e.cause?.code ?? e.code, "
        "String(e.cause?.message ?? e.message).slice(0, 200)]; } };\n"
        "const viaHttp = (p) => new Promise((resolve) => http.get(`http://127.0.0.1:${p}/h`, "
        "(res) => { let b = ''; res.on('data', (c) => b += c); res.on('end', () => "
        "resolve([res.statusCode, b])); }).on('error', (e) => resolve([e.code, e.message])));\n"
        "return { fetchOk: await viaFetch(port), httpOk: await viaHttp(port),"
        " fetchNo: await viaFetch(other), httpNo: await viaHttp(other) };"
    )
    value = (await _run(attacker, code))["value"]
    assert value["fetchOk"] == [200, "allowed"], value
    assert value["httpOk"] == [200, "allowed"], value
    assert value["fetchNo"][0] == "EGRESS_REFUSED", value
    assert value["httpNo"][0] == "EGRESS_REFUSED", value
    assert len(hits) == 2 and all(b"127.0.0.1" in h for h in hits)


def test_descriptors_the_server_inherits_stay_out_of_the_jail(tmp_path: Path) -> None:
    """A real ``sluice serve`` (on uvloop, which ignores ``close_fds``) started with an open
    descriptor of its parent's: every account's runner used to inherit it into the jail."""
    sluice = str(Path(sys.executable).with_name("sluice"))
    read_end, write_end = os.pipe()
    os.dup2(write_end, 777)  # inheritable, as a shell's pipe is
    port = free_port()
    env = {**os.environ, "SLUICE_DATA_DIR": str(tmp_path), "SLUICE_PORT": str(port)}
    env["SLUICE_SANDBOX"] = "on"
    proc = subprocess.Popen(
        [sluice, "serve", "--host", "127.0.0.1"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(777,),
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "Application startup complete" in line:
                break
        made = subprocess.run(
            [sluice, "accounts", "create", "--name", "fds", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
        )
        key = json.loads(made.stdout)["api_key"]
        code = _source("return fs.readdirSync('/proc/self/fd').map(Number);")
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            created = c.post("/v1/sources", json={"component_code": code})
            assert created.status_code == 200, created.text
            ran = c.post(f"/v1/sources/{created.json()['data']['id']}/run", json={"event": {}})
        assert ran.status_code == 200, ran.text
        fds = ran.json()["data"]["value"]
        assert 777 not in fds, fds
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
        for fd in (read_end, write_end, 777):
            os.close(fd)
