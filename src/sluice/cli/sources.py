"""Source commands: ``deploy``, ``update``, ``delete``, ``events``, ``logs``.

Each parses, makes its API calls (docs/api.md, "Sources", "SSE") and renders. A source is
named by its id (``dc_…``) or its name slug, which the API accepts in place of an id.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sluice.cli import config, files, props, render
from sluice.cli.client import Client, segment
from sluice.errors import CliError

SourceArg = Annotated[str, typer.Argument(metavar="SOURCE", help="The source's id (dc_…) or name.")]


def register(app: typer.Typer) -> None:
    app.command()(deploy)
    app.command()(update)
    app.command()(delete)
    app.command()(events)
    app.command()(logs)


def connect(profile: str) -> Client:
    return Client(config.resolve(profile))


def resolve(api: Client, target: str) -> dict[str, Any]:
    """The source named by an id or a name, as ``GET /v1/sources/{id}`` returns it."""
    if not target.startswith("dc_"):
        render.note(f"Searching for sources matching {target}")
    try:
        source: dict[str, Any] = api.get(f"/v1/sources/{segment(target)}")["data"]
    except CliError as exc:
        if exc.status == 404:
            raise CliError(
                f"no source {target!r} in this account (`sluice list` shows them)",
                code="not_found",
                status=404,
            ) from exc
        raise
    return source


def component(api: Client, target: str) -> dict[str, Any]:
    """The saved component for a file (sent with its imports), a URL, or a key (the account's
    own, else the public registry's)."""
    path = Path(target)
    if path.is_file():
        bundle = files.collect(path)
        with render.spinner(f"Saving {bundle.entry_path}…"):
            saved: dict[str, Any] = api.post("/v1/components", bundle.body())["data"]
        return saved
    if target.startswith(("http://", "https://")):
        with render.spinner(f"Fetching {target}…"):
            saved = api.post("/v1/components", {"component_url": target})["data"]
        return saved
    if "/" in target or path.suffix in (".mjs", ".js", ".cjs", ".ts"):
        raise CliError(f"{target}: no such file", code="usage")
    for where in (
        f"/v1/components/{segment(target)}",
        f"/v1/components/registry/{segment(target)}",
    ):
        try:
            found: dict[str, Any] = api.get(where)["data"]
            return found
        except CliError as exc:
            if exc.status != 404:
                raise
    raise CliError(
        f"{target!r} is not a file, and no component has that key in the account or the public "
        "registry",
        code="not_found",
    )


def deploy(
    target: Annotated[
        str, typer.Argument(help="A component file, a registry key, or a URL to its code.")
    ],
    prop: props.PropOpt = None,
    props_file: props.PropsFileOpt = None,
    name: Annotated[
        str | None, typer.Option(help="The source's name (default: the component's).")
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Deploy a source from a file, a registry key or a URL.

    Asks for each required prop without a value (or takes --prop/--props), then prints the
    source's id, name, and endpoint URL or timer. A file goes with the files it imports by
    relative path and the nearest package.json.

    Example: sluice deploy sources/new-item/new-item.mjs --prop url=https://example.com/feed
    """
    api = connect(profile)
    saved = component(api, target)
    if saved.get("component_type") == "action":
        raise CliError(
            f"{saved.get('name')} is an action: actions run as workflow steps, only sources "
            f"deploy. Publish it with `sluice publish {target}`",
            code="usage",
        )
    definitions = saved.get("configurable_props") or []
    values = props.configure(api, saved, props.given(prop, props_file, definitions))
    with render.spinner("Deploying…"):
        source = api.post(
            "/v1/sources",
            {"component_id": saved["id"], "configured_props": values, "name": name},
        )["data"]
    if json_:
        render.data(source)
        return
    render.source_summary(source, "Deployed")
    show = source.get("name_slug") or source["id"]
    render.line("  Events:   ", (f"sluice events {show} -f", "bold"))
    render.line("  Logs:     ", (f"sluice logs {show} -f", "bold"))


def update(
    source_name: SourceArg,
    code: Annotated[
        str | None,
        typer.Argument(metavar="[FILE]", help="New code: a file (with its imports) or a URL."),
    ] = None,
    prop: props.PropOpt = None,
    props_file: props.PropsFileOpt = None,
    active: Annotated[
        bool | None, typer.Option("--active/--inactive", help="Activate or deactivate it.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Update a source: new code, prop values, name, or active state.

    The id, endpoint URL and db state stay. Hooks run as on Pipedream: deactivate, replace,
    activate. --prop values are merged into the current ones.

    Example: sluice update my-source source.mjs --prop count=5
    """
    api = connect(profile)
    current = resolve(api, source_name)
    body: dict[str, Any] = {}
    if code is not None:
        if Path(code).is_file():
            body.update(files.collect(Path(code)).body())
        elif code.startswith(("http://", "https://")):
            body["component_url"] = code
        else:
            raise CliError(f"{code}: no such file", code="usage")
    if prop or props_file:
        definitions = current.get("configurable_props") or []
        body["configured_props"] = {
            **editable_values(current),
            **props.given(prop, props_file, definitions),
        }
    if active is not None:
        body["active"] = active
    if name is not None:
        body["name"] = name
    if not body:
        raise CliError(
            "nothing to update: give a FILE, --prop, --active/--inactive or --name", code="usage"
        )
    with render.spinner("Updating…"):
        source = api.put(f"/v1/sources/{segment(current['id'])}", body)["data"]
    if json_:
        render.data(source)
    else:
        render.source_summary(source, "Updated")


def editable_values(source: dict[str, Any]) -> dict[str, Any]:
    """The source's configured values as ``PUT`` takes them back: secrets left out (the
    server keeps them), timers in their input form, platform-made values dropped."""
    kinds = {p["name"]: p.get("type") for p in source.get("configurable_props") or []}
    out: dict[str, Any] = {}
    for name, value in (source.get("configured_props") or {}).items():
        kind = kinds.get(name)
        if kind is None or kind in ("$.interface.http", "$.service.db", "alert"):
            continue
        if value == {"secret": True}:
            continue
        if kind == "$.interface.timer" and isinstance(value, dict):
            if value.get("cron"):
                value = {"cron": value["cron"], "timezone": value.get("timezone")}
                value = {k: v for k, v in value.items() if v is not None}
            elif value.get("interval_seconds"):
                value = {"intervalSeconds": value["interval_seconds"]}
        out[name] = value
    return out


def delete(
    source_name: SourceArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Delete a source with its events and logs.

    Its deactivate hook runs first. Asks for confirmation unless --yes.

    Example: sluice delete my-source --yes
    """
    api = connect(profile)
    source = resolve(api, source_name)
    shown = f"{source.get('name_slug')} ({source['id']})"
    if not yes:
        if not sys.stdin.isatty():
            raise CliError(f"not deleting {shown} without confirmation: add --yes", code="usage")
        if not typer.confirm(f"Delete {shown} with its events and logs?", err=True):
            raise CliError("nothing deleted", code="usage")
    api.delete(f"/v1/sources/{segment(source['id'])}")
    if json_:
        render.data({"id": source["id"], "deleted": True})
    else:
        render.line(("Deleted ", "bold red"), shown)


def events(
    source_name: SourceArg,
    n: Annotated[
        int | None,
        typer.Option("-n", min=1, max=100, help="How many of the newest events (default 10)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Then print new events as they come.")
    ] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: Annotated[
        bool, typer.Option("--json", help="One JSON line per event, with its id and metadata.")
    ] = False,
) -> None:
    """Print a source's newest events, each payload as JSON.

    Oldest first, 10 by default (-n up to 100); -f then follows the live stream until Ctrl+C
    (-f alone prints only new events).

    Example: sluice events my-source -n 20 -f
    """
    api = connect(profile)
    source = resolve(api, source_name)
    base = f"/v1/sources/{segment(source['id'])}"
    after = None
    if n is not None or not follow:
        page = api.get(f"{base}/event_summaries", expand="event", limit=n or 10)["data"]
        for item in reversed(page):
            _print_event(item, json_)
        # Nothing missed between the list and the stream: resume after what was printed.
        after = page[0]["id"] if page else "0-0"
    if not follow:
        return
    try:
        for message in api.follow(
            f"{base}/sse", after=after, on_reconnect=_reconnecting("event stream")
        ):
            if isinstance(message.data, dict) and message.data.get("k") == "emit":
                _print_event(summary_item(source["id"], message.data), json_)
    except KeyboardInterrupt:
        return


def summary_item(source_id: str, emitted: dict[str, Any]) -> dict[str, Any]:
    """A streamed event in the shape of an ``event_summaries`` item."""
    return {
        "id": emitted.get("id"),
        "indexed_at_ms": emitted.get("ts"),
        "event": emitted.get("e"),
        "metadata": {
            "emitter_id": source_id,
            "name": emitted.get("name", ""),
            **(emitted.get("metadata") or {}),
        },
    }


def _print_event(item: dict[str, Any], json_: bool) -> None:
    if json_:
        render.data_line(item)
    else:
        render.event_payload(item.get("event"))


def logs(
    source_name: SourceArg,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Then print new lines as they come.")
    ] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: Annotated[bool, typer.Option("--json", help="One JSON line per log line.")] = False,
) -> None:
    """Print a source's log lines: console output, thrown errors, dedupe drops.

    The newest 100, oldest first; -f then follows the live stream until Ctrl+C.

    Example: sluice logs my-source -f
    """
    api = connect(profile)
    source = resolve(api, source_name)
    base = f"/v1/sources/{segment(source['id'])}"

    def show(item: dict[str, Any]) -> None:
        render.data_line(item) if json_ else render.log_line(item)

    if not follow:
        lines = api.get(f"{base}/logs", limit=100)["data"]
        for item in reversed(lines):
            show(item)
        if not lines and not json_:
            # On stderr: a script reading stdout still gets nothing, a person gets an answer.
            render.note(f"No log lines yet for {source['name']} (sluice logs -f waits for them).")
        return
    try:
        # ?after=0 replays the newest 100 lines, then the live ones, with no gap between.
        for message in api.follow(
            f"{base}/logs/sse", after="0", on_reconnect=_reconnecting("log stream")
        ):
            if isinstance(message.data, dict):
                show(message.data)
    except KeyboardInterrupt:
        return


def _reconnecting(what: str) -> Any:
    def report(reason: str) -> None:
        render.warn(f"{what}: {reason}; reconnecting")

    return report
