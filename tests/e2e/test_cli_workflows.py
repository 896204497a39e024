"""`sluice workflows` for real: the executable in a subprocess against a `sluice serve` process
(the server, account and login of tests/e2e/test_cli.py's ``cli`` fixture)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.e2e import test_cli
from tests.e2e.test_cli import Cli, one_line_error

# The same module-scoped fixture: one server, one account, a config file from `sluice login`.
cli = test_cli.cli

GREET = """\
export default defineComponent({
  async run({ steps, $ }) {
    console.log("greeting", steps.trigger.event.who);
    return { greeting: `hello ${steps.trigger.event.who}` };
  },
});
"""

WORKFLOW = """\
name: greeter
trigger:
  type: http
steps:
  - name: greet
    code_file: ./steps/greet.mjs
  - name: shout
    code: |
      export default defineComponent({
        async run({ steps, $ }) {
          if (steps.trigger.event.fail) throw new Error("asked to fail");
          $.export("length", steps.greet.$return_value.greeting.length);
          return steps.greet.$return_value.greeting.toUpperCase() + SUFFIX;
        },
      });
"""


def project(root: Path, suffix: str = '""', name: str = "greeter") -> Path:
    (root / "steps").mkdir(parents=True, exist_ok=True)
    (root / "steps" / "greet.mjs").write_text(GREET)
    file = root / "workflow.yaml"
    file.write_text(WORKFLOW.replace("SUFFIX", suffix).replace("greeter", name))
    return file


def test_deploy_run_errors_list_update_delete(cli: Cli, tmp_path: Path) -> None:
    file = project(tmp_path)
    (tmp_path / "event.json").write_text('{"who": "ada"}')

    out = cli.ok("workflows", "deploy", str(file))
    workflow_id = re.search(r"Deployed (p_\w+)", out).group(1)
    assert re.search(r"Name:\s+greeter", out) and re.search(r"Trigger:\s+http", out)
    endpoint = re.search(r"Endpoint:\s+(http://127\.0\.0\.1:\d+/e/\w+)", out).group(1)
    steps = dict(re.findall(r"(greet|shout)\s+(c_\w+)\s+code", out))
    assert set(steps) == {"greet", "shout"}
    assert f"sluice workflows run {workflow_id}" in out
    assert f"sluice workflows errors {workflow_id}" in out
    stored = cli.api.get(f"/v1/workflows/{workflow_id}").json()["data"]
    assert stored["steps"][0]["code"] == GREET  # code_file was read, relative to the file
    assert stored["endpoint_url"] == endpoint

    # A run prints each step: status, logs, exports, return value.
    done = cli.run("workflows", "run", workflow_id, "--event", str(tmp_path / "event.json"))
    assert done.returncode == 0, done.stderr
    assert re.search(r"Run \w+\s+success", done.stdout)
    assert re.search(r"greet\s+success\s+[\d.]+ ms\s+" + steps["greet"], done.stdout)
    assert re.search(r"log\s+greeting ada", done.stdout)
    assert 'return: {"greeting": "hello ada"}' in done.stdout
    assert "export length: 9" in done.stdout and 'return: "HELLO ADA"' in done.stdout

    # A failing run: the stack under its step, one error line, exit status 1.
    failed = cli.run("workflows", "run", "greeter", "--event-json", '{"who": "bob", "fail": 1}')
    one_line_error(failed, "failed in step shout", steps["shout"], "Error: asked to fail")
    assert re.search(r"shout\s+error", failed.stdout)
    assert "Error: asked to fail" in failed.stdout and "at Object.run" in failed.stdout
    failed_run = re.search(r"Run (\w+)\s+error", failed.stdout).group(1)
    as_json = cli.run("workflows", "run", workflow_id, "--event-json", '{"fail": 1}', "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["msg"] == "asked to fail"

    # Its errors, newest first.
    errors = cli.ok("workflows", "errors", workflow_id, "-n", "5").splitlines()
    assert errors[0].split() == ["TIME", "CODE", "MESSAGE", "STEP", "RUN"]
    assert len(errors) == 3
    assert f"shout ({steps['shout']})" in errors[2] and failed_run in errors[2]
    assert "asked to fail" in errors[2]
    page = json.loads(cli.ok("workflows", "errors", workflow_id, "-n", "1", "--json"))
    assert page["page_info"]["total_count"] == 2 and len(page["data"]) == 1
    assert page["data"][0]["event"]["error"]["cellId"] == steps["shout"]
    assert page["data"][0]["event"]["original_event"] == {"fail": 1}

    # Runs, newest first, and a replay of the failed one.
    runs = cli.ok("workflows", "runs", workflow_id).splitlines()
    assert len(runs) == 4 and "success" in runs[3] and failed_run in runs[2]
    assert "shout: Error: asked to fail" in runs[2]
    replayed = cli.run("workflows", "replay", failed_run)
    one_line_error(replayed, "failed in step shout")
    assert f"(replay of {failed_run})" in replayed.stdout

    # Listed both ways.
    assert workflow_id in cli.ok("list", "workflows")
    listed = cli.ok("workflows", "list")
    assert re.search(rf"{workflow_id}\s+greeter\s+yes\s+http {re.escape(endpoint)}", listed)
    assert workflow_id in [w["id"] for w in json.loads(cli.ok("list", "workflows", "--json"))]
    got = json.loads(cli.ok("workflows", "get", workflow_id, "--json"))
    assert got["name"] == "greeter" and [s["name"] for s in got["steps"]] == ["greet", "shout"]

    # Updated with --id: same id, endpoint and step ids; the new code runs.
    project(tmp_path, suffix='"!"', name="greeter2")
    out = cli.ok("workflows", "deploy", str(file), "--id", workflow_id)
    assert f"Updated {workflow_id}" in out and re.search(r"Name:\s+greeter2", out)
    assert endpoint in out and steps["greet"] in out and steps["shout"] in out
    done = cli.run("workflows", "run", workflow_id, "--event-json", '{"who": "cy"}')
    assert done.returncode == 0 and 'return: "HELLO CY!"' in done.stdout

    # ... and with `id:` in the file.
    file.write_text(f"id: {workflow_id}\n" + file.read_text().replace("greeter2", "greeter3"))
    updated = json.loads(cli.ok("workflows", "deploy", str(tmp_path), "--json"))
    assert (updated["id"], updated["name"]) == (workflow_id, "greeter3")

    one_line_error(cli.run("workflows", "delete", workflow_id), "--yes")
    assert f"Deleted greeter3 ({workflow_id})" in cli.ok("workflows", "delete", "greeter3", "-y")
    assert cli.api.get(f"/v1/workflows/{workflow_id}").status_code == 404
    one_line_error(cli.run("workflows", "get", workflow_id), f"no workflow {workflow_id}")


def test_a_json_file_with_an_action_step_and_references(cli: Cli, tmp_path: Path) -> None:
    action = tmp_path / "echo.mjs"
    action.write_text(
        'export default { name: "Echo", key: "wf-echo", version: "0.0.1", type: "action",\n'
        '  props: { text: { type: "string" } },\n'
        "  async run({ $ }) { return `echo: ${this.text}`; } };\n"
    )
    cli.ok("publish", str(action))
    body = {
        "name": "echoer",
        "trigger": {"type": "manual"},
        "steps": [
            {
                "name": "make",
                "code": "export default defineComponent({ async run() { return 41; } })",
            },
            {
                "name": "echo",
                "action": "wf-echo",
                "props": {"text": "{{steps.make.$return_value}}"},
            },
        ],
    }
    (tmp_path / "workflow.json").write_text(json.dumps(body))
    workflow = json.loads(cli.ok("workflows", "deploy", str(tmp_path / "workflow.json"), "--json"))
    assert workflow["trigger"] == {"type": "manual"} and workflow["steps"][1]["type"] == "action"
    run = json.loads(cli.ok("workflows", "run", workflow["id"], "--json"))
    assert run["status"] == "success"
    assert run["steps"][1]["return_value"] == "echo: 41"
    cli.ok("workflows", "delete", workflow["id"], "--yes")


def test_file_problems_are_one_line_errors_naming_the_file(cli: Cli, tmp_path: Path) -> None:
    file = project(tmp_path)
    one_line_error(cli.run("workflows", "deploy", str(tmp_path / "nope.yaml")), "no such file")

    file.write_text("name: x\ntrigger: {type: http\nsteps: []\n")
    one_line_error(cli.run("workflows", "deploy", str(file)), "line 3, column 6", "not valid YAML")

    file.write_text("name: x\ntriger: {type: http}\n")
    one_line_error(
        cli.run("workflows", "deploy", str(file)), "line 2", "unknown key 'triger' at the top"
    )

    # What the server refuses is pointed at the file, and at the code_file of the step.
    project(tmp_path)
    (tmp_path / "steps" / "greet.mjs").write_text("export default defineComponent({ run( })")
    one_line_error(
        cli.run("workflows", "deploy", str(file)),
        f"{file}: ",
        "SyntaxError",
        "steps[0].code, from ./steps/greet.mjs",
    )
    file.write_text(WORKFLOW.replace("type: http", "type: htp"))
    one_line_error(cli.run("workflows", "deploy", str(file)), f"{file}: trigger.type must be")
    one_line_error(cli.run("workflows", "run", "p_nope"), "no workflow p_nope")
    one_line_error(
        cli.run("workflows", "run", "p_nope", "--event-json", "{"), "--event-json is not JSON"
    )


def test_subscriptions_create_list_delete(cli: Cli, tmp_path: Path) -> None:
    ids = []
    for name in ("emitter", "listener"):
        body = {
            "name": f"sub-{name}",
            "trigger": {"type": "manual"},
            "steps": [{"name": "s", "code": "export default defineComponent({ run() {} })"}],
        }
        ids.append(cli.api.post("/v1/workflows", json=body).json()["data"]["id"])
    emitter, listener = ids
    link = ("--emitter", emitter, "--listener", listener, "--channel", "$errors")
    created = json.loads(cli.ok("subscriptions", "create", *link, "--json"))
    assert created["emitter_id"] == emitter and created["event_name"] == "$errors"
    listed = json.loads(cli.ok("subscriptions", "list", "--json"))
    assert [s["listener_id"] for s in listed if s["emitter_id"] == emitter] == [listener]
    assert "Deleted" in cli.ok("subscriptions", "delete", *link)
    listed = json.loads(cli.ok("list", "subscriptions", "--json"))
    assert emitter not in [s["emitter_id"] for s in listed]
    one_line_error(
        cli.run("subscriptions", "create", "--emitter", "sub-emitter", "--listener", listener),
        "give a source id (dc_…) or a workflow id (p_…)",
    )
    for workflow_id in ids:
        cli.ok("workflows", "delete", workflow_id, "--yes")
