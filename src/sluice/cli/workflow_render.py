"""How ``sluice workflows`` shows workflows to people: a workflow's summary, the workflows
table, a run with its steps, the runs and errors tables, and a failed run's one-line error.

``--json`` output does not come through here (``render.data`` prints the API's answer).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from sluice.cli import render
from sluice.errors import CliError


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


def name(workflow: dict[str, Any]) -> str:
    """The workflow's name, or its id when it has none."""
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


def runs_table(page: dict[str, Any], workflow_id: str) -> None:
    """A page of ``GET /v1/workflows/{id}/runs``: id, status, start, duration, failing step."""
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
    render.print_table(table, len(page["data"]), f"no runs yet: sluice workflows run {workflow_id}")


def errors_table(page: dict[str, Any], workflow: dict[str, Any]) -> None:
    """A page of the workflow's ``$errors`` event summaries (``expand=event``): time, code,
    message, step, run."""
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
    render.print_table(table, len(page["data"]), f"no errors for {name(workflow)}")
