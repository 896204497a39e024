"""``sluice workflows``: deploy a workflow from a ``workflow.yaml`` file, list, get and delete
workflows, run one now, and read its runs and errors.

The file has the shape of the ``POST /v1/workflows`` body (``name``, ``trigger``, ``steps``,
``active``) plus an optional ``id`` (deploying again updates that workflow), and a step may
give ``code_file: ./steps/x.mjs`` (relative to the file) instead of inline ``code``. A ``.json``
file with the same structure works too. See docs/workflow-yaml.md.

    loaded = load_file(Path("workflow.yaml"))
    api.post("/v1/workflows", loaded.body)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table
from rich.text import Text

from sluice.cli import config, render
from sluice.cli.client import Client, CliError, segment

#: The keys of a workflow file's top level (and ``x-…`` ones, ignored: YAML anchors), and of
#: each of its steps.
TOP_KEYS = ("id", "name", "trigger", "steps", "active", "global_errors")
STEP_KEYS = ("name", "code", "code_file", "action", "props")
#: What ``deploy`` looks for when given a folder.
FILE_NAMES = ("workflow.yaml", "workflow.yml", "workflow.json")
_DOCS = "see docs/workflow-yaml.md"
_STEP_SHAPE = "a name, code or code_file or action, and props"

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


# The workflow file -------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowFile:
    """A loaded workflow file: the body for ``POST``/``PUT /v1/workflows`` (every
    ``code_file`` read into ``code``), the ``id`` it names, and where each step's code came
    from (for error messages)."""

    path: Path
    body: dict[str, Any]
    id: str | None = None
    #: Step index → the ``code_file`` it was read from, as written in the file.
    code_files: dict[int, str] = field(default_factory=dict)


class _Loader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice and keeps dates as the text written (the body
    is sent as JSON)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *defaults`: merged keys may be overridden
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            continue  # construct_pairs below says what is wrong
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first on line {seen[key]})",
                key_node.start_mark,
            )  # fmt: skip
        seen[key] = key_node.start_mark.line + 1
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


def _text(loader: _Loader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _text)


def find_file(path: Path) -> Path:
    """``path`` itself, or the ``workflow.yaml`` (``.yml``, ``.json``) in a folder."""
    if path.is_dir():
        for name in FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise CliError(
            f"{path} is a folder without {', '.join(FILE_NAMES)}: give the workflow file",
            code="usage",
        )
    if not path.exists():
        raise CliError(f"{path}: no such file", code="usage")
    return path


def load_file(path: Path) -> WorkflowFile:
    """Read and check a workflow file (YAML, or JSON when it ends in ``.json``). Every
    problem is a :class:`CliError` naming the file, and the line when it is known."""
    path = find_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text", code="bad_workflow_file") from exc
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", code="bad_workflow_file") from exc
    lines: dict[tuple[Any, ...], int] = {}
    if path.suffix.lower() == ".json":
        data = _parse_json(path, text)
    else:
        data, lines = _parse_yaml(path, text)
    return _check(path, data, lines)


def _parse_json(path: Path, text: str) -> Any:
    if not text.strip():
        raise CliError(
            f"{path} is empty: a workflow has a trigger and steps ({_DOCS})",
            code="bad_workflow_file",
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path}, line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}",
            code="bad_workflow_file",
        ) from exc


def _parse_yaml(path: Path, text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """The document, and the line of each top-level key and of each step and its keys."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        raise CliError(_yaml_problem(path, exc), code="bad_workflow_file") from exc
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not valid YAML: {exc}", code="bad_workflow_file") from exc
    finally:
        loader.dispose()
    if data is None:
        raise CliError(
            f"{path} is empty: a workflow has a trigger and steps ({_DOCS})",
            code="bad_workflow_file",
        )
    lines: dict[tuple[Any, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            lines[(key,)] = key_node.start_mark.line + 1
            if key == "steps" and isinstance(value_node, yaml.SequenceNode):
                for i, step in enumerate(value_node.value):
                    lines[("steps", i)] = step.start_mark.line + 1
                    if isinstance(step, yaml.MappingNode):
                        for step_key, _ in step.value:
                            name = getattr(step_key, "value", None)
                            lines[("steps", i, name)] = step_key.start_mark.line + 1
    return data, lines


def _yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
    message = f"{where}: not valid YAML: {exc.problem or exc.context or 'cannot parse'}"
    if exc.problem and exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark.line != getattr(mark, "line", None):
            message += f" started on line {exc.context_mark.line + 1}"
        message += ")"
    return message


def _check(path: Path, data: Any, lines: dict[tuple[Any, ...], int]) -> WorkflowFile:
    def fail(*key: Any, message: str) -> CliError:
        line = lines.get(key) if key else None
        where = f"{path}, line {line}" if line else str(path)
        return CliError(f"{where}: {message}", code="bad_workflow_file")

    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else repr(data)
        raise fail(message=f"the top level must be a mapping of {', '.join(TOP_KEYS)}, not {kind}")
    for key in data:
        if key not in TOP_KEYS and not (isinstance(key, str) and key.startswith("x-")):
            raise fail(
                key,
                message=f"unknown key {key!r} at the top level; a workflow file has "
                f"{', '.join(TOP_KEYS)} ({_DOCS})",
            )
    workflow_id = data.get("id")
    if workflow_id is not None and not (
        isinstance(workflow_id, str) and workflow_id.startswith("p_")
    ):
        raise fail(
            "id", message=f"id must be a workflow id such as p_Ab3xY9pQ2rTu, not {workflow_id!r}"
        )
    body: dict[str, Any] = {
        k: data[k] for k in ("name", "trigger", "active", "global_errors") if k in data
    }
    code_files: dict[int, str] = {}
    if "steps" in data:
        if not isinstance(data["steps"], list):
            raise fail(
                "steps",
                message=f"steps must be a list; each step has {_STEP_SHAPE}",
            )
        body["steps"] = []
        for i, step in enumerate(data["steps"]):
            if not isinstance(step, dict):
                raise fail(
                    "steps",
                    i,
                    message=f"step {i + 1} must be a mapping of {_STEP_SHAPE}, not {step!r}",
                )
            label = f"step {i + 1}"
            if isinstance(step.get("name"), str):
                label += f" ({step['name']})"
            for key in step:
                if key not in STEP_KEYS:
                    raise fail(
                        "steps",
                        i,
                        key,
                        message=f"{label} has an unknown key {key!r}; "
                        f"a step has {_STEP_SHAPE} ({_DOCS})",
                    )
            if "code_file" in step:
                if "code" in step:
                    raise fail(
                        "steps",
                        i,
                        "code_file",
                        message=f"{label} has both code and code_file: keep one",
                    )
                written = step["code_file"]
                try:
                    code = _read_code(path, written)
                except ValueError as exc:
                    raise fail("steps", i, "code_file", message=f"{label}: {exc}") from exc
                step = {**{k: v for k, v in step.items() if k != "code_file"}, "code": code}
                code_files[i] = written
            body["steps"].append(step)
    try:
        json.dumps(body, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise fail(message=f"a value cannot be sent as JSON: {exc}") from exc
    return WorkflowFile(path=path, body=body, id=workflow_id, code_files=code_files)


def _read_code(path: Path, written: Any) -> str:
    """The text of a step's ``code_file``, relative to the workflow file's folder."""
    if not isinstance(written, str) or not written.strip():
        raise ValueError(f"code_file must be a path such as ./steps/x.mjs, not {written!r}")
    code_path = path.parent / written
    try:
        return code_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(
            f"code_file {written}: no such file (looked for {code_path.absolute()})"
        ) from None
    except IsADirectoryError:
        raise ValueError(f"code_file {written} is a folder, not a module") from None
    except UnicodeDecodeError:
        raise ValueError(f"code_file {written} is not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"cannot read code_file {written}: {exc.strerror}") from None


# Rendering ---------------------------------------------------------------------------------


def trigger_text(workflow: dict[str, Any], *, url: bool = True) -> str:
    """How the workflow is triggered, in a few words (an HTTP trigger: with its URL)."""
    trigger = workflow.get("trigger") or {}
    kind = trigger.get("type")
    if kind == "http":
        text = "http"
        endpoint = trigger.get("endpoint_url") or workflow.get("endpoint_url")
        if url and endpoint:
            text += f" {endpoint}"
        return text + (" (custom response)" if trigger.get("custom_response") else "")
    if kind == "timer":
        if trigger.get("cron"):
            return f"timer: cron {trigger['cron']} ({trigger.get('timezone') or 'UTC'})"
        seconds = trigger.get("intervalSeconds") or trigger.get("interval_seconds")
        if seconds:
            return f"timer: every {_every(int(seconds))}"
        return "timer"
    if kind == "source":
        channel = trigger.get("event_name") or ""
        return f"source {trigger.get('source_id')}" + (f" (channel {channel})" if channel else "")
    if kind == "manual":
        return "manual"
    return str(kind)


def _every(seconds: int) -> str:
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def _when(ms: int | float | None) -> str:
    """Local ``YYYY-MM-DD HH:MM:SS``."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _ms(value: float | int | None) -> str:
    if value is None:
        return ""
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def _one_line(text: Any, limit: int = 200) -> str:
    """A message for a table cell: whitespace collapsed, at most ``limit`` characters."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _name(workflow: dict[str, Any]) -> str:
    return str(workflow.get("name") or workflow["id"])


def summary(workflow: dict[str, Any], verb: str) -> None:
    """What deploy and get print about a workflow."""
    wid = workflow["id"]
    render.line((f"{verb} ", "bold green"), (wid, "bold"))
    render.line("  Name:      ", workflow.get("name") or "(none)")
    render.line("  Trigger:   ", (trigger_text(workflow, url=False), "cyan"))
    if workflow.get("endpoint_url"):
        render.line("  Endpoint:  ", (str(workflow["endpoint_url"]), "cyan"))
    if not workflow.get("active", True):
        render.line("  Active:    ", ("no", "yellow"), " (set active: true in its file and deploy)")
    if workflow.get("is_error_workflow"):
        render.line("  Role:      ", ("the account's global error workflow", "magenta"))
    steps = workflow.get("steps") or []
    width = max((len(str(s.get("name"))) for s in steps), default=0)
    for i, step in enumerate(steps):
        what = step.get("type") or ""
        if what == "action":
            what += f" {step.get('action')}"
        render.line(
            "  Steps:     " if i == 0 else "             ",
            (f"{step.get('name')!s:<{width}}", "bold"),
            "  ",
            str(step.get("id")),
            (f"  {what}", "dim"),
        )


def workflows_table(workflows: list[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "ACTIVE", "TRIGGER", "STEPS", "UPDATED"):
        table.add_column(column, overflow="fold")
    for w in workflows:
        name = Text(str(w.get("name") or ""))
        if w.get("is_error_workflow"):
            name.append(" (error workflow)", "magenta")
        table.add_row(
            w["id"],
            name,
            Text("yes", "green") if w.get("active") else Text("no", "yellow"),
            trigger_text(w),
            ", ".join(str(s.get("name")) for s in w.get("steps") or []),
            render.date(w.get("updated_at")),
        )
    # render's table printer: full width on a terminal, one line per row in a pipe.
    render.print_table(
        table, len(workflows), "no workflows yet: sluice workflows deploy workflow.yaml"
    )


_STATUS_STYLES = {"success": "green", "error": "bold red", "exited": "yellow"}


def _json_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= 100:
        return text
    return json.dumps(value, ensure_ascii=False, default=str, indent=2)


def _block(label: str, text: str, indent: str = "      ", style: str = "") -> None:
    first, *rest = text.splitlines() or [""]
    render.line(indent, (label, "dim"), (first, style))
    pad = indent + " " * len(label)
    for more in rest:
        render.line(pad, (more, style))


def print_run(run: dict[str, Any]) -> None:
    """A run for people: its status, then each step's status, time, logs, exports, return
    value and error."""
    status = str(run.get("status"))
    replay = f"  (replay of {run['replay_of']})" if run.get("replay_of") else ""
    render.line(
        ("Run ", "bold"),
        (str(run.get("id")), "bold"),
        "  ",
        (status, _STATUS_STYLES.get(status, "")),
        "  ",
        (_ms(run.get("duration_ms")), "dim"),
        replay,
    )
    for step in run.get("steps") or []:
        step_status = str(step.get("status"))
        render.line(
            "  ",
            (str(step.get("name")), "bold"),
            "  ",
            (step_status, _STATUS_STYLES.get(step_status, "")),
            "  ",
            (_ms(step.get("duration_ms")), "dim"),
            (f"  {step.get('id')}", "dim"),
        )
        for log in step.get("logs") or []:
            render.log_line(log, prefix="      ")
        for name, value in (step.get("exports") or {}).items():
            _block(f"export {name}: ", _json_text(value))
        if step.get("error"):
            error = step["error"]
            stack = error.get("stack") or f"{error.get('code')}: {error.get('message')}"
            _block("", str(stack), style="red")
        elif step_status == "success" and step.get("return_value") is not None:
            _block("return: ", _json_text(step["return_value"]))
    if run.get("flow_exit"):
        reason = (run["flow_exit"] or {}).get("reason")
        render.line("  ", ("$.flow.exit", "yellow"), f": {reason}" if reason else "")
    if run.get("response"):
        _block("Response: ", _json_text(run["response"]), indent="  ")
    sends = run.get("sends") or []
    if sends:
        kinds = ", ".join(str(s.get("type") or s.get("kind") or "?") for s in sends)
        render.line("  ", ("Sends: ", "dim"), f"{len(sends)} ({kinds})")


def run_failed(run: dict[str, Any]) -> CliError:
    """The one-line error of a failed run: where and what."""
    error = run.get("error") or {}
    where = ""
    if error.get("cellId"):
        step = error.get("step_name")
        where = f" in step {step} ({error['cellId']})" if step else f" in step {error['cellId']}"
    what = str(error.get("code") or "Error")
    if error.get("msg"):
        what += f": {_one_line(error['msg'])}"
    return CliError(
        f"the run {run.get('id')} failed{where}: {what}; "
        f"see `sluice workflows errors {run.get('workflow_id')}`",
        code="run_failed",
    )


# Commands ----------------------------------------------------------------------------------


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


#: The API's ``field`` as the client appends it to a message: `` (steps[1].code)``.
_FIELD = re.compile(r" \(((?:steps|trigger|name|active)\b[^()]*)\)$")
_CODE_FIELD = re.compile(r"\bsteps\[(\d+)\]\.code\b")


def _explain(exc: CliError, loaded: WorkflowFile) -> CliError:
    """A server's refusal of the file's content, pointed at the file (and at the step's
    code_file when the problem is in its code)."""
    suffix = _FIELD.search(exc.message)
    if exc.status != 400 and not (exc.status in (404, 409, 422) and suffix):
        return exc
    message = exc.message
    code = _CODE_FIELD.search(message)
    written = loaded.code_files.get(int(code.group(1))) if code else None
    if written and suffix:
        message = f"{message[: suffix.end() - 1]}, from {written})"
    elif written:
        message += f" (from {written})"
    return CliError(
        f"{loaded.path}: {message}", code=exc.code, status=exc.status, details=exc.details
    )


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
    loaded = load_file(file)
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
        raise _explain(exc, loaded) from exc
    if json_:
        render.data(workflow)
        return
    summary(workflow, verb)
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
        workflows_table(items)


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
    summary(found, "Workflow")
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
        print_run(run)
    if run.get("status") == "error":
        raise run_failed(run)


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
    try:
        with render.spinner(f"Running {_name(found)}…"):
            path = f"/v1/workflows/{segment(found['id'])}/runs"
            result = api.post(path, {"event": event})["data"]
    except CliError as exc:
        if exc.status == 409 and "inactive" in exc.message:
            raise CliError(
                f"{_name(found)} ({found['id']}) is inactive: set `active: true` in its workflow "
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
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("RUN", "STATUS", "STARTED", "DURATION", "DETAIL"):
        table.add_column(column, overflow="fold")
    for item in page["data"]:
        status = str(item.get("status"))
        detail = ""
        if item.get("error"):
            error = item["error"]
            step = error.get("step_name") or error.get("cellId") or ""
            detail = _one_line(f"{step}: {error.get('code')}: {error.get('msg')}")
        elif item.get("flow_exit"):
            detail = _one_line(f"exit: {(item['flow_exit'] or {}).get('reason') or ''}")
        if item.get("replay_of"):
            detail = (detail + " " if detail else "") + f"(replay of {item['replay_of']})"
        table.add_row(
            str(item.get("id")),
            Text(status, _STATUS_STYLES.get(status, "")),
            _when(item.get("started_at_ms")),
            _ms(item.get("duration_ms")),
            detail,
        )
    render.print_table(table, len(page["data"]), f"no runs yet: sluice workflows run {found['id']}")


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
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("TIME", "CODE", "MESSAGE", "STEP", "RUN"):
        table.add_column(column, overflow="fold")
    for item in page["data"]:
        event = item.get("event") or {}
        error = event.get("error") or item.get("error") or {}
        context = event.get("original_context") or {}
        step = str(error.get("cellId") or "")
        if error.get("step_name"):
            step = f"{error['step_name']} ({step})"
        table.add_row(
            _when(item.get("indexed_at_ms")),
            Text(str(error.get("code") or ""), "red"),
            _one_line(error.get("msg")),
            step,
            str(context.get("id") or ""),
        )
    render.print_table(table, len(page["data"]), f"no errors for {_name(found)}")
