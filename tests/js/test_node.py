"""The Node runner's own tests (``node --test tests/js/``), run by pytest as one test so they
share the cores with the rest of the suite: run before pytest by ``bin/test``, they held one
core for ~7.6 s while the other waited (``node --test`` runs one file at a time on 2 cores)."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_the_node_runner_tests_pass() -> None:
    done = subprocess.run(
        ["node", "--test", "--test-reporter=tap", str(HERE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # On a failure, TAP's "not ok" blocks say which test and why (the last 20,000 characters).
    assert done.returncode == 0, (done.stdout + done.stderr)[-20000:]
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout, done.stdout[-2000:]
