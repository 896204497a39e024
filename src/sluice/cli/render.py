"""What the CLI prints: Rich tables and colour for people, JSON for scripts (``--json``).

Data goes to stdout; prompts, progress and errors to stderr, so ``sluice list --json | jq``
sees JSON only. Text from the server (log lines, names) is never read as Rich markup.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts) instead of text for people.")
]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
#: Streams print from threads (``dev``): one line at a time.
_lock = threading.Lock()


def data(value: Any) -> None:
    """Pretty JSON on stdout (``--json`` output of one object or list)."""
    _write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def data_line(value: Any) -> None:
    """One compact JSON line on stdout (``--json`` output of a stream)."""
    _write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")


def _write(text: str) -> None:
    with _lock:
        sys.stdout.write(text)
        sys.stdout.flush()


def error(message: str) -> None:
    with _lock:
        err.print(Text.assemble(("error: ", "bold red"), message))


def warn(message: str) -> None:
    with _lock:
        err.print(Text.assemble(("warning: ", "bold yellow"), message))


def note(message: str, style: str = "dim") -> None:
    """A line for people on stderr (progress, hints)."""
    with _lock:
        err.print(Text(message, style=style))


def line(*parts: str | tuple[str, str]) -> None:
    """A line for people on stdout, from plain strings and ``(text, style)`` pairs."""
    with _lock:
        out.print(Text.assemble(*parts))


@contextlib.contextmanager
def spinner(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (deploys that install npm packages);
    nothing when stderr is not a terminal."""
    if not err.is_terminal:
        yield
        return
    with err.status(Text(message), spinner="dots"):
        yield


def clock(ts_ms: int | float | None) -> str:
    """``HH:MM:SS.mmm`` in local time."""
    if ts_ms is None:
        return "--:--:--.---"
    moment = datetime.fromtimestamp(ts_ms / 1000, tz=UTC).astimezone()
    return moment.strftime("%H:%M:%S.") + f"{int(ts_ms) % 1000:03d}"


def date(epoch_s: int | None) -> str:
    if epoch_s is None:
        return ""
    return datetime.fromtimestamp(epoch_s, tz=UTC).astimezone().strftime("%Y-%m-%d %H:%M")


# Sources ---------------------------------------------------------------------------------------


def trigger(source: dict[str, Any]) -> str:
    """How the source is triggered: its endpoint URL, its timer, or "manual"."""
    if source.get("endpoint_url"):
        return str(source["endpoint_url"])
    configurable = {p["name"]: p for p in source.get("configurable_props") or []}
    for name, value in (source.get("configured_props") or {}).items():
        if configurable.get(name, {}).get("type") != "$.interface.timer":
            continue
        if isinstance(value, dict) and value.get("cron"):
            zone = value.get("timezone") or "UTC"
            return f"timer: cron {value['cron']} ({zone})"
        if isinstance(value, dict) and value.get("interval_seconds"):
            return f"timer: every {_duration(int(value['interval_seconds']))}"
    return "manual (POST /v1/sources/<id>/run)"


def _duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def source_summary(source: dict[str, Any], verb: str) -> None:
    """What deploy, update and dev print about a source."""
    name = source.get("name_slug") or source["id"]
    line((f"{verb} ", "bold green"), (source["id"], "bold"))
    # The name as the UI and the API show it; the slug (what commands take) beside it when
    # it differs.
    shown = source.get("name") or name
    line("  Name:     ", shown, *([("  (", "dim"), name, (")", "dim")] if shown != name else []))
    line("  Trigger:  ", (trigger(source), "cyan"))
    if not source.get("active", True):
        line("  Active:   ", ("no", "yellow"), " (sluice update ", name, " --active)")


def _name(source: dict[str, Any]) -> str:
    """A source's name as the UI shows it, with its slug (what commands take) when it differs."""
    name, slug = source.get("name") or "", source.get("name_slug") or ""
    if name and slug and name != slug:
        return f"{name} ({slug})"
    return name or slug


def sources_table(sources: Iterable[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "ACTIVE", "TRIGGER", "CREATED"):
        table.add_column(column, overflow="fold")
    count = 0
    for s in sources:
        count += 1
        table.add_row(
            s["id"],
            _name(s),
            Text("yes", "green") if s.get("active") else Text("no", "yellow"),
            trigger(s),
            date(s.get("created_at")),
        )
    print_table(table, count, "no sources yet: sluice deploy FILE")


def components_table(components: Iterable[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "KEY", "NAME", "VERSION", "TYPE", "CREATED"):
        table.add_column(column, overflow="fold")
    count = 0
    for c in components:
        count += 1
        kind = c.get("component_type") or ""
        if c.get("registry"):
            kind += " (registry)"
        table.add_row(
            c["id"],
            c.get("key") or "",
            c.get("name") or "",
            c.get("version") or "",
            kind,
            date(c.get("created_at")),
        )
    print_table(table, count, "no components yet: sluice publish FILE")


def subscriptions_table(subscriptions: Iterable[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "EMITTER", "LISTENER", "CHANNEL", "CREATED"):
        table.add_column(column, overflow="fold")
    count = 0
    for s in subscriptions:
        count += 1
        channel = s.get("event_name") or ""
        table.add_row(
            s["id"],
            s.get("emitter_id") or "",
            s.get("listener_id") or "",
            channel or Text("(default)", "dim"),
            date(s.get("created_at")),
        )
    print_table(table, count, "no subscriptions")


def print_table(table: Table, count: int, empty: str) -> None:
    with _lock:
        if count and out.is_terminal:
            out.print(table)
        elif count:  # a pipe or a file: no width to fit, keep each row on one line
            Console(width=100_000, highlight=False).print(table)
        else:
            err.print(Text(empty, style="dim"))


# Events and logs -------------------------------------------------------------------------------


def event_payload(payload: Any) -> None:
    """An event as pd prints it: its payload as JSON."""
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    with _lock:
        if out.is_terminal:
            out.print_json(text)
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


_LEVEL_STYLES = {"error": "red", "stderr": "red", "warn": "yellow", "debug": "dim"}


def log_line(item: dict[str, Any], prefix: str = "") -> None:
    level = str(item.get("level") or "log")
    parts: list[str | tuple[str, str]] = []
    if prefix:
        parts.append((prefix, "magenta"))
    parts += [(clock(item.get("ts")) + " ", "dim"), (f"{level:<6} ", _LEVEL_STYLES.get(level, ""))]
    parts.append((str(item.get("msg", "")), _LEVEL_STYLES.get(level, "")))
    line(*parts)
