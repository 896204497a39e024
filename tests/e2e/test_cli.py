"""The `sluice` client commands for real: a real server process, and each command a process of
its own. The server and the one-shot commands (``Cli.run``) are forked from the test process's
zygote (``tests/zygote.py``: the command's own code, run with its arguments, environment and
streams, without paying its imports again); the long-running and interactive ones
(``Cli.start``: ``dev``, ``events -f``, prompts on a pseudo-terminal) exec the installed
``sluice`` executable, as ``tests/e2e/test_serve.py`` and ``test_readme_prompts.py`` do.

Nothing waits on time: a test reads the child's output until the text it expects appears
(with a generous overall limit). Prompts are answered through a pseudo-terminal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import zygote
from tests.conftest import CACHE
from tests.ports import free_port

SLUICE = str(Path(sys.executable).with_name("sluice"))
FIXTURES = Path(__file__).parent / "fixtures" / "cli"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\r")


@dataclass
class Cli:
    base_url: str
    api_key: str
    env: dict[str, str]
    config: Path
    api: httpx.Client

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return zygote.run(args, env={**self.env, **(env or {})}, timeout=120)

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def start(self, *args: str, tty: bool = False) -> Child:
        return Child([SLUICE, *args], self.env, tty=tty)


def _interruptible() -> None:
    """In the child before exec: SIGINT at its default, so Python turns it into
    KeyboardInterrupt as in a terminal. A test process started in the background by a
    non-interactive shell (``(bin/test &)``) ignores SIGINT, and an ignored signal stays ignored
    through exec: `sluice dev` and `events -f` never saw the tests' Ctrl+C (3 failures)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _as_a_terminal_child() -> None:
    _interruptible()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Child:
    """A running `sluice`; ``expect`` reads its output until a text appears."""

    def __init__(self, argv: list[str], env: dict[str, str], *, tty: bool) -> None:
        self.text = ""
        self.seen = 0
        if tty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
            self.proc = subprocess.Popen(
                argv,
                env={**env, "TERM": "xterm", "COLUMNS": "200"},
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                # The pty becomes the child's controlling terminal: hidden prompts read it.
                preexec_fn=_as_a_terminal_child,
            )
            os.close(slave)
            self.fd = master
        else:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=_interruptible,
            )
            assert self.proc.stdout is not None
            self.fd = self.proc.stdout.fileno()

    def _read(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the pty's other end closed
            chunk = b""
        if not chunk:
            return False
        self.text = _ANSI.sub("", self.text + chunk.decode(errors="replace"))
        return True

    def expect(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        """Wait for ``pattern`` (a regex) after what earlier expects matched."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.text, self.seen)
            if found:
                self.seen = found.end()
                return found
            if time.monotonic() > deadline or not self._read(deadline):
                self.kill()
                pytest.fail(f"no {pattern!r} in the output of sluice:\n{self.text[self.seen :]}")

    def expect_all(self, *patterns: str, timeout: float = 90) -> None:
        """Wait for every pattern, in any order (lines of two streams interleave freely)."""
        start, end = self.seen, self.seen
        for pattern in patterns:
            self.seen = start
            end = max(end, self.expect(pattern, timeout).end())
        self.seen = end

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self._read(deadline) and time.monotonic() < deadline:
            pass
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        else:
            os.close(self.fd)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """One server for the module, an account, and a config file written by `sluice login`."""
    with cli_server(tmp_path_factory.mktemp("cli-data")) as cli:
        yield cli


@contextlib.contextmanager
def cli_server(data_dir: Path, settings: dict[str, str] | None = None) -> Iterator[Cli]:
    """A server (with ``settings``: SLUICE_* variables) and a logged-in CLI for it."""
    port = free_port()
    env = {
        **os.environ,
        "SLUICE_DATA_DIR": str(data_dir),
        "SLUICE_NPM_STORE": str(CACHE / "npm-store"),
        "SLUICE_CONFIG": str(data_dir / "cli-config"),
        "COLUMNS": "200",
    }
    for name in ("SLUICE_API_KEY", "SLUICE_BASE_URL", "SLUICE_PROFILE"):
        env.pop(name, None)
    server = zygote.popen(
        ["serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**env, **(settings or {})},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    seen = []
    for line in server.stderr:
        seen.append(line)
        if "Application startup complete" in line:
            break
    else:
        pytest.fail("sluice serve exited:\n" + "".join(seen))
    drain = threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True)
    drain.start()
    try:
        created = zygote.run(
            ["accounts", "create", "--name", "ada", "--email", "ada@example.com"],
            env=env,
            check=True,
        )
        key = json.loads(created.stdout)["api_key"]
        base = f"http://127.0.0.1:{port}"
        login = zygote.run(["login", "--base-url", base, "--api-key", key], env=env)
        assert login.returncode == 0, login.stderr
        assert "Logged in as ada (ada@example.com)" in login.stdout
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as api:
            yield Cli(base, key, env, data_dir / "cli-config", api)
    finally:
        server.terminate()
        server.wait(timeout=20)
        drain.join(timeout=20)
        server.stderr.close()


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of a registry-style app folder (package.json, app file, sources, actions)."""
    return Path(shutil.copytree(FIXTURES / "demo", tmp_path / "demo"))


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done
    lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("Searching for")]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_login_profiles_and_clear_errors(cli: Cli, tmp_path: Path) -> None:
    assert cli.config.stat().st_mode & 0o777 == 0o600
    assert f"api_key = {cli.api_key}" in cli.config.read_text()

    one_line_error(
        cli.run("login", "--base-url", cli.base_url, "--api-key", "slk_wrong"),
        "refused that API key",
    )
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    one_line_error(
        cli.run("list", env={"SLUICE_BASE_URL": closed}), "cannot reach Sluice", "sluice serve"
    )
    one_line_error(cli.run("list", env={"SLUICE_API_KEY": "slk_nope"}), "SLUICE_API_KEY")
    one_line_error(cli.run("list", "--profile", "work"), "sluice login --profile work")

    copy = tmp_path / "config"
    shutil.copy(cli.config, copy)
    assert "Logged out" in cli.run("logout", env={"SLUICE_CONFIG": str(copy)}).stdout
    assert "api_key" not in copy.read_text() and cli.base_url in copy.read_text()
    one_line_error(cli.run("list", env={"SLUICE_CONFIG": str(copy)}), "sluice login")


def test_deploy_asks_for_props_through_a_terminal(cli: Cli, demo: Path) -> None:
    account = cli.api.post(
        "/v1/accounts", json={"app": "demo", "name": "work", "credentials": {"tone": "warm"}}
    ).json()["data"]
    child = cli.start("deploy", str(demo / "sources/new-thing/new-thing.mjs"), tty=True)
    try:
        child.expect(r"1\) work\s+" + account["id"])
        child.expect(r"Which demo account\?")
        child.send("1")
        child.expect(r"Pick a color")  # the description, then the first page of async options
        child.expect(r"1\) Red")
        child.expect(r"m for more")
        child.send("m")
        child.expect(r"2\) Blue")
        child.send("2")
        child.expect(r"How big")
        child.expect(r"Size:")
        child.send("0")
        child.expect(r"give at least 1")
        child.send("3")
        child.expect(r"2\) slow")
        child.send("2")
        # getpass writes the prompt's last space once echo is off (it flushes input before).
        child.expect(r"Token: ")
        child.send("s3cret")
        source_id = child.expect(r"Deployed (dc_\w+)").group(1)
        child.expect(r"Trigger:\s+http://127\.0\.0\.1:\d+/e/\w+")
        assert child.finish() == 0
    finally:
        child.close()
    assert "s3cret" not in child.text  # a secret prompt does not echo
    source = cli.api.get(f"/v1/sources/{source_id}").json()["data"]
    configured = source["configured_props"]
    assert configured["demo"] == {"authProvisionId": account["id"]}
    assert (configured["color"], configured["size"], configured["mode"]) == ("blue-warm", 3, "slow")
    assert configured["token"] == {"secret": True}
    run = cli.api.post(f"/v1/sources/{source_id}/run", json={}).json()["data"]
    assert run["ok"], run


def test_deploy_with_flags_then_events_logs_list_update_delete(cli: Cli, demo: Path) -> None:
    account = cli.api.post(
        "/v1/accounts", json={"app": "demo", "name": "ci", "credentials": {"tone": "cool"}}
    ).json()["data"]
    (demo / "props.json").write_text(json.dumps({"mode": "fast", "token": "abc"}))
    deployed = cli.run(
        "deploy", str(demo / "sources/new-thing/new-thing.mjs"), "--name", "flags",
        "--prop", f"demo={account['id']}", "--prop", "color=red", "--prop", "size=2",
        "--props", str(demo / "props.json"), "--json",
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stderr
    source = json.loads(deployed.stdout)
    assert source["name_slug"] == "flags" and source["endpoint_url"]
    component = cli.api.get(f"/v1/components/{source['component_id']}").json()["data"]
    # Sent with what it imports, paths relative to the package root (package.json's folder).
    assert component["entry_path"] == "sources/new-thing/new-thing.mjs"
    assert component["files"] == ["demo.app.mjs", "package.json", "sources/common/base.mjs"]

    missing = cli.run("deploy", str(demo / "sources/new-thing/new-thing.mjs"))
    one_line_error(missing, "missing required props: demo", "--prop")

    quiet = cli.run("logs", "flags")  # nothing logged yet: said so on stderr, stdout empty
    assert quiet.returncode == 0 and quiet.stdout == ""
    assert "No log lines yet for flags" in quiet.stderr

    for _ in range(2):
        assert cli.api.post(f"/v1/sources/{source['id']}/run", json={}).json()["data"]["ok"]
    printed = cli.run("events", "flags", "-n", "5")
    assert printed.returncode == 0 and "Searching for sources matching flags" in printed.stderr
    assert json.loads(printed.stdout.split("\n}\n")[0] + "}")["greet"] == "hello x"
    lines = cli.ok("events", source["id"], "--json").splitlines()
    assert [json.loads(x)["metadata"]["summary"] for x in lines] == ["a fast thing"] * 2
    assert "got demo red" in cli.ok("logs", "flags")

    listed = json.loads(cli.ok("list", "--json"))
    assert source["id"] in [s["id"] for s in listed]
    assert source["id"] in cli.ok("list", "sources")

    updated = json.loads(cli.ok("update", "flags", "--prop", "size=7", "--inactive", "--json"))
    assert updated["active"] is False and updated["configured_props"]["size"] == 7
    assert updated["configured_props"]["token"] == {"secret": True}  # kept, not resent

    one_line_error(cli.run("delete", "flags"), "--yes")
    assert "Deleted flags" in cli.ok("delete", "flags", "--yes")
    assert cli.api.get(f"/v1/sources/{source['id']}").status_code == 404


def test_publish_new_versions_by_key_and_dev_refuses_actions(cli: Cli, demo: Path) -> None:
    action = demo / "actions/say/say.mjs"
    first = json.loads(cli.ok("publish", str(action), "--json"))
    action.write_text(action.read_text().replace('"0.0.1"', '"0.0.2"'))
    out = cli.ok("publish", str(action))
    second = re.search(r"Published (sc_\w+)", out)
    assert second and second.group(1) != first["id"]
    newest = cli.api.get("/v1/components/demo-say").json()["data"]
    assert (newest["id"], newest["version"]) == (second.group(1), "0.0.2")
    listed = json.loads(cli.ok("list", "components", "--json"))
    assert {first["id"], second.group(1)} <= {c["id"] for c in listed}
    assert all("code" not in c for c in listed)

    one_line_error(cli.run("dev", str(action)), "actions cannot be developed with `sluice dev`")
    one_line_error(cli.run("deploy", str(action)), "sluice publish")
    one_line_error(cli.run("publish", str(action), "--registry"), "only admin accounts publish")


DEV_SOURCE = """
export default {
  name: "Dev Counter",
  version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    const n = (this.db.get("n") || 0) + 1;
    this.db.set("n", n);
    console.log(`run ${n}`);
    this.$emit({ version: VERSION, n });
  },
};
"""


def test_dev_updates_the_same_source_on_each_save(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "counter.mjs"
    file.write_text(DEV_SOURCE.replace("VERSION", '"one"'))
    child = cli.start("dev", str(file), "--delete")
    try:
        source_id = child.expect(r"Deployed (dc_\w+)").group(1)
        endpoint = child.expect(r"Trigger:\s+(\S+)").group(1)
        child.expect(r"Ready for updates!")
        assert httpx.post(endpoint, json={}).status_code == 200
        child.expect_all(r'event\s+\{"version":"one","n":1\}', r"log\s+run 1")

        file.write_text(DEV_SOURCE.replace("VERSION", '"two"'))
        child.expect(rf"Updated {source_id}")
        assert httpx.post(endpoint, json={}).status_code == 200
        child.expect(r'event\s+\{"version":"two","n":2\}')  # same source: its db state kept

        file.write_text(DEV_SOURCE.replace("VERSION", '"three"').replace("async run", "async run("))
        child.expect(r"error: .*SyntaxError.*the last good version keeps running")
        assert httpx.post(endpoint, json={}).status_code == 200
        child.expect(r'event\s+\{"version":"two","n":3\}')

        child.proc.send_signal(signal.SIGINT)
        child.expect(rf"Deleted dev-counter \({source_id}\)")
        assert child.finish() == 0
    finally:
        child.close()
    assert cli.api.get(f"/v1/sources/{source_id}").status_code == 404


def test_dev_sends_a_save_made_before_it_was_ready(cli: Cli, tmp_path: Path) -> None:
    """A save between the deploy and "Ready for updates!" (the file watcher not yet armed) is
    sent once the watcher is: it was lost before, until the next save."""
    file = tmp_path / "early.mjs"
    file.write_text(DEV_SOURCE.replace("VERSION", '"one"').replace("Dev Counter", "Early"))
    child = cli.start("dev", str(file), "--delete")
    try:
        source_id = child.expect(r"Deployed (dc_\w+)").group(1)
        file.write_text(DEV_SOURCE.replace("VERSION", '"two"').replace("Dev Counter", "Early"))
        endpoint = child.expect(r"Trigger:\s+(\S+)").group(1)
        child.expect(r"Ready for updates!")
        child.expect(rf"Updated {source_id}")
        assert httpx.post(endpoint, json={}).status_code == 200
        child.expect(r'event\s+\{"version":"two","n":1\}')
        child.proc.send_signal(signal.SIGINT)
        child.expect(rf"Deleted early \({source_id}\)")
        assert child.finish() == 0
    finally:
        child.close()


def test_events_follow_prints_new_events_until_interrupted(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "ping.mjs"
    file.write_text(
        'export default { name: "Ping", version: "0.0.1", '
        "async run(event) { this.$emit({ pong: event.n }); } };"
    )
    source = json.loads(cli.ok("deploy", str(file), "--json"))
    cli.api.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 1}})
    child = cli.start("events", source["id"], "-n", "1", "-f", "--json")
    try:
        child.expect(r'"event":\{"pong":1\}')
        # The stream resumes after the last event listed: nothing is missed in between.
        cli.api.post(f"/v1/sources/{source['id']}/run", json={"event": {"n": 2}})
        found = child.expect(r'\{"id":"[\d-]+","indexed_at_ms":\d+,"event":\{"pong":2\}')
        assert found
        child.proc.send_signal(signal.SIGINT)
        assert child.finish() == 0
    finally:
        child.close()
    cli.ok("delete", source["id"], "--yes")


def test_data_stores_from_the_command_line(cli: Cli) -> None:
    assert "Created ds_" in cli.ok("data-stores", "create", "cli-cache")
    assert "cli-cache" in cli.ok("data-stores", "list")
    cli.ok("data-stores", "set", "cli-cache", "count", "41")
    cli.ok("data-stores", "set", "cli-cache", "greeting", "hello", "--ttl", "3600")
    assert json.loads(cli.ok("data-stores", "get", "cli-cache", "count")) == 41
    lines = [json.loads(x) for x in cli.ok("data-stores", "records", "cli-cache").splitlines()]
    assert lines == [{"key": "count", "value": 41}, {"key": "greeting", "value": "hello"}]
    [listed] = [s for s in json.loads(cli.ok("data-stores", "list", "--json"))
                if s["name"] == "cli-cache"]  # fmt: skip
    assert listed["record_count"] == 2
    cli.ok("data-stores", "delete-key", "cli-cache", "count")
    one_line_error(cli.run("data-stores", "get", "cli-cache", "count"), "no record")
    cli.ok("data-stores", "clear", "cli-cache")
    assert cli.ok("data-stores", "records", "cli-cache") == ""
    assert "Deleted cli-cache" in cli.ok("data-stores", "delete", "cli-cache")
    one_line_error(cli.run("data-stores", "records", "cli-cache"), "no data store")


def test_environment_variables_from_the_command_line(cli: Cli) -> None:
    assert "Set API_TOKEN" in cli.ok("env", "set", "API_TOKEN", "cli-s3cret")
    piped = subprocess.run(
        [SLUICE, "env", "set", "PIPED"],
        env=cli.env,
        input="from-stdin\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    listed = cli.ok("env", "list")
    assert "API_TOKEN" in listed and "PIPED" in listed and "cli-s3cret" not in listed
    names = [v["name"] for v in json.loads(cli.ok("env", "list", "--json"))]
    assert names == ["API_TOKEN", "PIPED"]
    one_line_error(cli.run("env", "set", "1BAD", "x"), "letters, digits and _")
    assert "Deleted PIPED" in cli.ok("env", "unset", "PIPED")
    one_line_error(cli.run("env", "unset", "PIPED"), "no environment variable")


def test_oauth_clients_from_the_command_line(cli: Cli) -> None:
    made = json.loads(cli.ok("oauth-clients", "create", "deploy script", "--json"))
    assert made["client_id"].startswith("oc_") and made["client_secret"].startswith("slcs_")
    shown = cli.ok("oauth-clients", "create", "second")
    assert "client_secret: slcs_" in shown and "(shown only now)" in shown
    listed = cli.ok("oauth-clients", "list")
    assert made["client_id"] in listed and "deploy script" in listed and "slcs_" not in listed
    # The pair a script keeps: exchanged for a token that the API takes as a bearer.
    with httpx.Client(base_url=cli.base_url, timeout=60) as http:
        issued = http.post(
            "/v1/oauth/token",
            json={
                "grant_type": "client_credentials",
                "client_id": made["client_id"],
                "client_secret": made["client_secret"],
            },
        )
        assert issued.status_code == 200, issued.text
        bearer = {"Authorization": f"Bearer {issued.json()['access_token']}"}
        assert http.get("/v1/users/me", headers=bearer).json()["data"]["username"] == "ada"
        assert f"Deleted {made['client_id']}" in cli.ok(
            "oauth-clients", "delete", made["client_id"]
        )
        assert http.get("/v1/users/me", headers=bearer).status_code == 401
    one_line_error(cli.run("oauth-clients", "delete", made["client_id"]), "no OAuth client")
