"""``sluice workflows``: deploy a workflow from a ``workflow.yaml`` file, list, get and delete
workflows, run one now, and read its runs and errors.

The commands parse their arguments, make the API call and hand the answer to
``workflow_render``; reading and checking the file is ``workflow_file``'s (docs/workflow-yaml.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sluice.cli import config, render, workflow_file, workflow_render
from sluice.cli.client import Client, segment
from sluice.errors import CliError

app = typer.Typer(
    help="Workflows: deploy one from a workflow.yaml file, run it, read its runs and errors.",
    no_args_is_help=True,
)

WorkflowArg = Annotated[
    str, typer.Argument(metavar="WORKFLOW", help="The workflow's id (p_…) or its exact name.")
]
CountOpt = Annotated[int, typer.Option("-n", min=1, max=100, help="How many, newest first.")]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="workflows")


def connect(profile: str) -> Client:
    return Client(config.resolve(profile))


def resolve(api: Client, target: str) -> dict[str, Any]:
    """The workflow named by an id (``p_…``) or its exact name."""
    if not target.startswith("p_"):
        render.note(f"Searching for workflows named {target}")
        found = [w for w in api.pages("/v1/users/me/workflows") if w.get("name") == target]
        if len(found) == 1:
            only: dict[str, Any] = found[0]
            return only
        if found:
            raise CliError(
                f"{len(found)} workflows are named {target!r}: give the id "
                f"({', '.join(w['id'] for w in found)})",
                code="usage",
            )
        raise CliError(
            f"no workflow {target!r} in this account (`sluice workflows list` shows them)",
            code="not_found",
            status=404,
        )
    try:
        workflow: dict[str, Any] = api.get(f"/v1/workflows/{segment(target)}")["data"]
    except CliError as exc:
        if exc.status == 404:
            raise CliError(
                f"no workflow {target} in this account (`sluice workflows list` shows them)",
                code="not_found",
                status=404,
            ) from exc
        raise
    return workflow


@app.command()
def deploy(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="The workflow.yaml (or .json) file, or a folder holding one."
        ),
    ],
    workflow_id: Annotated[
        str | None,
        typer.Option("--id", help="Update this workflow (p_…) instead of creating one."),
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Deploy a workflow from a workflow.yaml file: create it, or update it when --id is given
    or the file has `id:`.

    Code steps are checked and their npm packages installed while it deploys. Prints the id,
    trigger, endpoint URL and step ids. An update keeps the id, the endpoint URL, and the id of
    each step whose name stays.

    Example: sluice workflows deploy workflow.yaml --id p_Ab3xY9pQ2rTu
    """
    loaded = workflow_file.load_file(file)
    target = workflow_id or loaded.id
    if workflow_id and loaded.id and workflow_id != loaded.id:
        render.warn(f"{loaded.path} names {loaded.id}; updating {workflow_id} (--id)")
    api = connect(profile)
    verb = "Updated" if target else "Deployed"
    try:
        with render.spinner(f"Deploying {loaded.path}…"):
            if target:
                workflow = api.put(f"/v1/workflows/{segment(target)}", loaded.body)["data"]
            else:
                workflow = api.post("/v1/workflows", loaded.body)["data"]
    except CliError as exc:
        if target and exc.status == 404 and f"workflow {target} " in exc.message:
            raise CliError(
                f"no workflow {target} to update in this account; remove --id (or id: from "
                f"{loaded.path}) to create one",
                code="not_found",
                status=404,
            ) from exc
        raise workflow_file.explain(exc, loaded) from exc
    if json_:
        render.data(workflow)
        return
    workflow_render.summary(workflow, verb)
    wid = workflow["id"]
    render.line("  Run:       ", (f"sluice workflows run {wid} --event-json '{{}}'", "bold"))
    render.line("  Errors:    ", (f"sluice workflows errors {wid}", "bold"))
    if not target:
        render.line(
            "  Update:    ",
            (f"sluice workflows deploy {file} --id {wid}", "bold"),
            (f"  (or add `id: {wid}` to the file)", "dim"),
        )


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the account's workflows: id, name, active, trigger, steps.

    Also `sluice list workflows`. --json prints every workflow object (every page).

    Example: sluice workflows list --json
    """
    items = list(connect(profile).pages("/v1/users/me/workflows"))
    if json_:
        render.data(items)
    else:
        workflow_render.workflows_table(items)


@app.command()
def get(
    workflow: WorkflowArg,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Show a workflow: name, trigger, endpoint URL, steps (--json: with their code).

    Example: sluice workflows get p_Ab3xY9pQ2rTu
    """
    found = resolve(connect(profile), workflow)
    if json_:
        render.data(found)
        return
    workflow_render.summary(found, "Workflow")
    render.line("  Created:   ", render.date(found.get("created_at")))
    render.line("  Updated:   ", render.date(found.get("updated_at")))


@app.command()
def delete(
    workflow: WorkflowArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Delete a workflow with its runs and errors. Asks for confirmation unless --yes.

    Example: sluice workflows delete p_Ab3xY9pQ2rTu --yes
    """
    api = connect(profile)
    found = resolve(api, workflow)
    shown = f"{found.get('name')} ({found['id']})" if found.get("name") else found["id"]
    if not yes:
        if not sys.stdin.isatty():
            raise CliError(f"not deleting {shown} without confirmation: add --yes", code="usage")
        question = f"Delete {shown} with its runs and errors?"
        if found.get("is_error_workflow"):
            question = f"{shown} is the account's global error workflow. " + question
        if not typer.confirm(question, err=True):
            raise CliError("nothing deleted", code="usage")
    api.delete(f"/v1/workflows/{segment(found['id'])}")
    if json_:
        render.data({"id": found["id"], "deleted": True})
    else:
        render.line(("Deleted ", "bold red"), shown)


def _event(event_file: Path | None, event_json: str | None) -> Any:
    if event_file is not None and event_json is not None:
        raise CliError("give --event FILE or --event-json TEXT, not both", code="usage")
    if event_json is not None:
        try:
            return json.loads(event_json)
        except json.JSONDecodeError as exc:
            raise CliError(f"--event-json is not JSON: {exc}", code="usage") from exc
    if event_file is None:
        return {}
    try:
        text = sys.stdin.read() if str(event_file) == "-" else event_file.read_text("utf-8")
    except FileNotFoundError as exc:
        raise CliError(f"{event_file}: no such file", code="usage") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {event_file}: {exc}", code="usage") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{event_file} is not JSON: {exc}", code="usage") from exc


def _show_run(run: dict[str, Any], json_: bool) -> None:
    if json_:
        render.data(run)
    else:
        workflow_render.print_run(run)
    if run.get("status") == "error":
        raise workflow_render.run_failed(run)


@app.command()
def run(
    workflow: WorkflowArg,
    event_file: Annotated[
        Path | None,
        typer.Option(
            "--event", metavar="FILE", help="The event (steps.trigger.event): a JSON file, - stdin."
        ),
    ] = None,
    event_json: Annotated[
        str | None, typer.Option("--event-json", metavar="JSON", help="The event as JSON text.")
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Run a workflow now on an event (default {}) and print each step: status, duration,
    logs, exports, return value, error.

    Exits with status 1 when the run failed (also with --json, which prints the run).

    Example: sluice workflows run p_Ab3xY9pQ2rTu --event event.json
    """
    event = _event(event_file, event_json)
    api = connect(profile)
    found = resolve(api, workflow)
    name = workflow_render.name(found)
    try:
        with render.spinner(f"Running {name}…"):
            path = f"/v1/workflows/{segment(found['id'])}/runs"
            result = api.post(path, {"event": event})["data"]
    except CliError as exc:
        if exc.status == 409 and "inactive" in exc.message:
            raise CliError(
                f"{name} ({found['id']}) is inactive: set `active: true` in its workflow "
                f"file and deploy it (sluice workflows deploy FILE --id {found['id']})",
                code=exc.code,
                status=409,
            ) from exc
        raise
    _show_run(result, json_)


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run's id.")],
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Run a workflow again on the event of an earlier run (the workflow as it is now).

    Prints the new run as `run` does; exits with status 1 when it failed.

    Example: sluice workflows replay 7aQ33c7k8XvdhGoM5KAF1T0xdsC
    """
    api = connect(profile)
    try:
        with render.spinner(f"Replaying {run_id}…"):
            result = api.post(f"/v1/runs/{segment(run_id)}/replay")["data"]
    except CliError as exc:
        if exc.status == 404 and exc.code == "not_found" and run_id in exc.message:
            raise CliError(
                f"no run {run_id} in this account (`sluice workflows runs WORKFLOW` lists them)",
                code="not_found",
                status=404,
            ) from exc
        raise
    _show_run(result, json_)


@app.command()
def runs(
    workflow: WorkflowArg,
    n: CountOpt = 10,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: Annotated[
        bool, typer.Option("--json", help="Print the API's answer (page_info and runs).")
    ] = False,
) -> None:
    """List a workflow's newest runs (10 by default, -n up to 100): id, status, start, duration,
    failing step.

    Example: sluice workflows runs p_Ab3xY9pQ2rTu -n 20
    """
    api = connect(profile)
    found = resolve(api, workflow)
    page = api.get(f"/v1/workflows/{segment(found['id'])}/runs", limit=n)
    if json_:
        render.data(page)
        return
    workflow_render.runs_table(page, found["id"])


@app.command()
def errors(
    workflow: WorkflowArg,
    n: CountOpt = 10,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: Annotated[
        bool,
        typer.Option("--json", help="Print the API's answer (expand=event: with each stack)."),
    ] = False,
) -> None:
    """List a workflow's newest errors (10 by default, -n up to 100): time, code, message,
    step, run.

    Example: sluice workflows errors p_Ab3xY9pQ2rTu -n 5
    """
    api = connect(profile)
    found = resolve(api, workflow)
    page = api.get(
        f"/v1/workflows/{segment(found['id'])}/$errors/event_summaries", expand="event", limit=n
    )
    if json_:
        render.data(page)
        return
    workflow_render.errors_table(page, found)
