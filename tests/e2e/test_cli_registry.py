"""`sluice registry import` and the deploy prompt's dynamic props, for real (a server process,
the executable, a pseudo-terminal)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cli import SLUICE, Cli, cli

__all__ = ["cli"]

DYNAMIC = """
export default {
  name: "Dynamic Counter",
  version: "0.0.1",
  props: {
    kind: { type: "string", label: "Kind", reloadProps: true,
            options: [{ label: "Plain", value: "plain" }, { label: "Counted", value: "counted" }] },
  },
  async additionalProps() {
    return this.kind === "counted" ? { start: { type: "integer", label: "Start at" } } : {};
  },
  async run() { this.$emit({ kind: this.kind, start: this.start }); },
};
"""


def test_deploy_asks_for_the_props_additional_props_adds(cli: Cli, tmp_path: Path) -> None:
    code = tmp_path / "dynamic.mjs"
    code.write_text(DYNAMIC)
    child = cli.start("deploy", str(code), tty=True)
    try:
        child.expect(r"2\) Counted")
        child.send("2")
        child.expect(r"Start at")  # asked only once "counted" was chosen
        child.expect(r"Start at:")
        child.send("7")
        source_id = child.expect(r"Deployed (dc_\w+)").group(1)
        assert child.finish() == 0
    finally:
        child.close()
    configured = cli.api.get(f"/v1/sources/{source_id}").json()["data"]["configured_props"]
    assert configured == {"kind": "counted", "start": 7}
    # Without a terminal, --prop gives the added prop; leaving it out names it.
    done = cli.run("deploy", str(code), "--prop", "kind=counted")
    assert done.returncode == 1 and "start" in done.stderr, done.stderr
    cli.ok("deploy", str(code), "--prop", "kind=counted", "--prop", "start=3")


@pytest.mark.npm
def test_registry_import_then_deploy_by_key(cli: Cli) -> None:
    created = subprocess.run(
        [SLUICE, "accounts", "create", "--name", "root", "--admin"],
        env=cli.env,
        capture_output=True,
        text=True,
        check=True,
    )
    admin = {"SLUICE_API_KEY": json.loads(created.stdout)["api_key"]}
    done = cli.run("registry", "import", "@pipedream/pipedream@0.4.2", env=admin)
    assert done.returncode == 0, done.stderr
    assert "@pipedream/pipedream 0.4.2: 5 components, 5 loaded, 0 skipped, 0 failed" in (
        done.stdout
    )
    assert re.search(r"loaded\s+pipedream-new-scheduled-tasks 0\.\d+\.\d+", done.stdout)
    assert re.search(r"app\s+pipedream kept \(built in\)", done.stdout), done.stdout
    again = json.loads(cli.run("registry", "import", "pipedream@0.4.2", "--json", env=admin).stdout)
    assert again["packages"][0]["counts"]["skipped"] == 5
    refused = cli.run("registry", "import", "pipedream")
    assert refused.returncode == 1 and "only admin accounts" in refused.stderr

    account = cli.api.post(
        "/v1/accounts", json={"app": "pipedream", "credentials": {"api_key": "k"}}
    ).json()["data"]
    out = cli.ok("deploy", "pipedream-new-scheduled-tasks", "--prop", f"pipedream={account['id']}")
    assert re.search(r"Deployed dc_\w+", out), out
