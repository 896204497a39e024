"""The README's tour shows the CLI's prompts as they are: ``sluice login`` and ``sluice deploy``
run in a pseudo-terminal (their prompts need one) against a real server, answered as a user
would, and each prompt line the README quotes appears in what they printed."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import termios
import time
from pathlib import Path

from tests.e2e.test_serve import SLUICE, server

__all__ = ["server"]  # the fixture

README = Path(__file__).resolve().parents[2] / "README.md"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A command in a pseudo-terminal: read what it printed until a text appears, type."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            os.chdir(cwd)
            os.execve(args[0], args, env)
        self.seen = ""

    def expect(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in ANSI.sub("", self.seen).replace("\r", ""):
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never printed; saw:\n{self.seen}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"{text!r} never printed; saw:\n{self.seen}"
                self.seen += chunk.decode(errors="replace")

    def echo_off(self, timeout_s: float = 30) -> None:
        """Wait until the command turned the terminal's echo off (a hidden prompt reads now:
        ``getpass`` discards what was typed before it)."""
        deadline = time.monotonic() + timeout_s
        while termios.tcgetattr(self.fd)[3] & termios.ECHO:
            assert time.monotonic() < deadline, f"echo never turned off; saw:\n{self.seen}"
            ready, _, _ = select.select([self.fd], [], [], 0.01)  # also keep reading
            if ready:
                self.seen += os.read(self.fd, 4096).decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def close(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def _readme_comments(after: str) -> list[str]:
    """The ``# …`` lines right after the README's line starting with ``after``, without their
    notes in parentheses."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("# "):
            break
        out.append(re.sub(r"\s{2,}\(.*\)$", "", line[2:]).rstrip())
    return out


def test_the_readmes_login_and_deploy_prompts(server: tuple[str, Path], tmp_path: Path) -> None:
    base, data_dir = server
    made = subprocess.run(
        [SLUICE, "accounts", "create", "--name", "ada", "--email", "ada@example.com",
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    key = json.loads(made.stdout)["api_key"]
    env = {**os.environ, "SLUICE_CONFIG": str(tmp_path / "config"), "TERM": "dumb"}

    login = Terminal([SLUICE, "login"], env, tmp_path)
    expected = _readme_comments("bin/sluice login")
    assert expected[0].startswith("Base URL [http://127.0.0.1:8000]:"), expected
    login.expect("Base URL [http://127.0.0.1:8000]: ")
    login.type(base)
    login.expect(expected[1])  # API key:
    login.echo_off()
    login.type(key)
    port = base.rsplit(":", 1)[1]
    login.expect(expected[2].replace("8000", port))  # Logged in as ada (…) on …
    login.expect("profile 'default' saved in ")
    assert login.close() == 0

    (tmp_path / "counter.mjs").write_text(
        re.search(r"cat > counter.mjs <<'JS'\n(.*?)\nJS\n", README.read_text(), re.S)[1]  # type: ignore[index]
    )
    deploy = Terminal([SLUICE, "deploy", "counter.mjs", "--prop", "step=2"], env, tmp_path)
    prompts = _readme_comments("bin/sluice deploy counter.mjs --prop step=2")
    for line in prompts[:3]:  # Configuring props…, greeting (greeting, string), greeting:
        deploy.expect(line)
    deploy.echo_off()  # a secret prop
    deploy.type("hello")
    for line in prompts[3:]:  # Deployed dc_…, Name, Trigger, Events, Logs
        deploy.expect(line.replace("dc_…", "dc_"))
    assert deploy.close() == 0
