"""`sluice registry import` and the deploy prompt's dynamic props, for real (a server process,
the executable, a pseudo-terminal)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from tests import monorepo
from tests.e2e.test_cli import Cli, cli

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
    created = cli.ok("accounts", "create", "--name", "root", "--admin")
    admin = {"SLUICE_API_KEY": json.loads(created)["api_key"]}
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


@pytest.mark.npm
def test_registry_import_from_a_monorepo_checkout_and_archive(cli: Cli, tmp_path: Path) -> None:
    """A checkout laid out as Pipedream's monorepo: one app or every app, from the directory
    and from an archive of it; each app's package.json dependency is installed from npm."""
    created = cli.ok("accounts", "create", "--name", "tree-admin", "--admin")
    admin = {"SLUICE_API_KEY": json.loads(created)["api_key"]}
    checkout = monorepo.write(
        tmp_path / "pipedream",
        {
            "treeone": monorepo.app_files("treeone", dependencies={"ms": "2.1.3"}),
            "treetwo": monorepo.app_files("treetwo"),
        },
    )
    one = cli.run("registry", "import", str(checkout), "--app", "treeone", env=admin)
    assert one.returncode == 0, one.stderr
    assert "@pipedream/treeone 0.1.0: 2 components, 2 loaded, 0 skipped, 0 failed" in one.stdout
    assert "treetwo" not in one.stdout and re.search(r"app\s+treeone added", one.stdout)
    archive = tmp_path / "pipedream-master.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(checkout, arcname="pipedream-master")
    every = json.loads(cli.run("registry", "import", str(archive), "--json", env=admin).stdout)
    counts = {p["name"]: p["counts"] for p in every["packages"]}
    assert counts == {
        "@pipedream/treeone": {"found": 2, "loaded": 0, "skipped": 2, "failed": 0},
        "@pipedream/treetwo": {"found": 2, "loaded": 2, "skipped": 0, "failed": 0},
    }, every
    missing = cli.run("registry", "import", str(checkout), "--app", "nope", env=admin)
    assert missing.returncode == 1 and "components/nope/" in missing.stderr, missing.stderr

    account = cli.api.post(
        "/v1/accounts", json={"app": "treeone", "credentials": {"oauth_access_token": "t"}}
    ).json()["data"]
    ran = cli.api.post(
        "/v1/actions/run",
        json={
            "component_key": "treeone-say-hi",
            "configured_props": {"treeone": {"authProvisionId": account["id"]}, "who": "ada"},
        },
    ).json()["data"]
    assert ran["ret"] == {"text": "hi ada", "dep": "function"}, ran  # ms, installed
