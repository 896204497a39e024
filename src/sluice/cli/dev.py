"""``sluice dev``: deploy a source file, update it on each save, print its logs and events live.

Every save sends the file and its imports with ``PUT /v1/sources/{id}``: the same ``dc_`` id,
endpoint and db state. The server checks everything before it changes anything, so a save
with a syntax or validation error is printed and the last good version keeps running. Events
and logs come from the source's two SSE streams, each read in its own thread; the main thread
watches the files (watchfiles) until Ctrl+C, then asks whether to delete the source.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from sluice.cli import config, files, props, render, sources
from sluice.cli.client import Client, Message, segment
from sluice.errors import CliError

#: How often the file watcher wakes with nothing changed (ms): its first wake says it is armed,
#: and only then is "Ready for updates!" shown (a save before that is sent then).
_ARMED_MS = 200
#: How long the live streams may take to connect before a warning says they did not.
_CONNECT_WAIT_S = 15.0
_CODE_SUFFIXES = (".mjs", ".js", ".cjs", ".json", ".ts", ".mts", ".cts")


def register(app: typer.Typer) -> None:
    app.command()(dev)


def dev(
    target: Annotated[
        str,
        typer.Argument(
            metavar="FILE_OR_NAME",
            help="The source's file (watched); with --dc, a file or the source's name.",
        ),
    ],
    dc: Annotated[
        str | None,
        typer.Option("--dc", help="Attach to this deployed source (dc_…) instead of a new one."),
    ] = None,
    keep: Annotated[
        bool | None,
        typer.Option(
            "--keep/--delete",
            help="On Ctrl+C, keep or delete the source without asking (default: ask; without "
            "a terminal, keep).",
        ),
    ] = None,
    prop: props.PropOpt = None,
    props_file: props.PropsFileOpt = None,
    name: Annotated[str | None, typer.Option(help="The new source's name.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Develop a source: deploy it, update it on each save, print its logs and events.

    Each save updates the same source (same id and endpoint); a save that fails to load or
    validate is printed and the last good version keeps running. On Ctrl+C, asks whether to
    delete it (--keep/--delete answer for scripts). Sources only: actions cannot be developed
    with dev (publish them).

    Example: sluice dev sources/new-item/new-item.mjs --prop url=https://example.com/feed
    """
    api = Client(config.resolve(profile))
    entry = _entry(target, dc)
    if dc is not None:
        session = _attach(api, target, dc, entry)
    else:
        assert entry is not None
        session = _Session(api, _deploy(api, entry, prop, props_file, name), entry)
        session.sent = session.bundle.body() if session.bundle else None
        render.source_summary(session.source, "Deployed")
    # A new source's streams replay from the start: the deploy hook's emits and logs too.
    session.start_streams(replay=dc is None)
    try:
        if entry is None:
            render.note("Attached (nothing to watch). Ctrl+C to stop.", style="bold")
            threading.Event().wait()
        else:
            session.watch()
    except KeyboardInterrupt:
        pass
    finally:
        session.stop.set()
    _finish(api, session.source, keep)


def _entry(target: str, dc: str | None) -> Path | None:
    """The file to watch, or None when ``target`` names the deployed source ``dc``."""
    path = Path(target)
    entry = path if path.is_file() else None
    if entry is None and (dc is None or "/" in target or path.suffix in _CODE_SUFFIXES):
        raise CliError(f"{target}: no such file", code="usage")
    return entry


def _attach(api: Client, target: str, dc: str, entry: Path | None) -> _Session:
    """A session on the deployed source ``dc``, sent the file's code now when there is one."""
    source = sources.resolve(api, dc)
    if entry is None and target not in (source["id"], source.get("name_slug")):
        raise CliError(f"{target} is neither a file nor the source {dc}", code="usage")
    session = _Session(api, source, entry)
    render.source_summary(source, "Attached to")
    if entry is not None:
        session.push()
    return session


def _deploy(
    api: Client,
    entry: Path,
    prop: list[str] | None,
    props_file: Path | None,
    name: str | None,
) -> dict[str, Any]:
    bundle = files.collect(entry)
    with render.spinner(f"Saving {bundle.entry_path}…"):
        saved = api.post("/v1/components", bundle.body())["data"]
    if saved.get("component_type") == "action":
        raise CliError(
            f"{saved.get('name')} is an action: actions cannot be developed with `sluice dev` "
            f"(sources only). Publish it with `sluice publish {entry}`",
            code="usage",
        )
    definitions = saved.get("configurable_props") or []
    values = props.configure(api, saved, props.given(prop, props_file, definitions))
    with render.spinner("Deploying…"):
        source: dict[str, Any] = api.post(
            "/v1/sources",
            {"component_id": saved["id"], "configured_props": values, "name": name},
        )["data"]
    return source


def _finish(api: Client, source: dict[str, Any], keep: bool | None) -> None:
    shown = f"{source.get('name_slug')} ({source['id']})"
    render.note("Stopped watching.")
    if keep is None:
        delete = sys.stdin.isatty() and typer.confirm(f"Delete {shown}?", default=False, err=True)
    else:
        delete = not keep
    if delete:
        api.delete(f"/v1/sources/{segment(source['id'])}")
        render.line(("Deleted ", "bold red"), shown)
    else:
        render.line(("Kept ", "bold"), shown, f" (sluice delete {source.get('name_slug')})")


class _Session:
    def __init__(self, api: Client, source: dict[str, Any], entry: Path | None) -> None:
        self.api = api
        self.source = source
        self.entry = entry
        self.bundle = files.collect(entry) if entry is not None else None
        #: The body of the last update the server took (or refused for its content).
        self.sent: dict[str, Any] | None = None
        self.stop = threading.Event()

    def start_streams(self, replay: bool) -> None:
        base = f"/v1/sources/{segment(self.source['id'])}"
        connected = []
        for path, after, show in (
            (f"{base}/sse", "0-0", self._show_event),
            (f"{base}/logs/sse", "0", self._show_log),
        ):
            ready = threading.Event()
            connected.append(ready)
            threading.Thread(
                target=self._pump,
                args=(path, after if replay else None, show, ready),
                daemon=True,
                name=f"sse {path}",
            ).start()
        if not all(ready.wait(_CONNECT_WAIT_S) for ready in connected):
            render.warn("the live streams did not connect; events and logs may not show")

    def _pump(
        self,
        path: str,
        after: str | None,
        show: Callable[[Any], None],
        ready: threading.Event,
    ) -> None:
        def reconnecting(reason: str) -> None:
            if not self.stop.is_set():
                render.warn(f"{reason}; reconnecting")

        try:
            for message in self.api.follow(
                path, after=after, stop=self.stop, on_connect=ready.set, on_reconnect=reconnecting
            ):
                if self.stop.is_set():
                    return
                show(message)
        except CliError as exc:
            if not self.stop.is_set():
                render.error(exc.message)

    def _show_event(self, message: Message) -> None:
        data = message.data if isinstance(message.data, dict) else {}
        if data.get("k") != "emit":
            return
        parts: list[str | tuple[str, str]] = [
            (render.clock(data.get("ts")) + " ", "dim"),
            ("event  ", "bold cyan"),
            json.dumps(data.get("e"), ensure_ascii=False, separators=(",", ":"), default=str),
        ]
        summary = (data.get("metadata") or {}).get("summary")
        if summary:
            parts.append((f"  {summary}", "dim"))
        if data.get("name"):
            parts.append((f"  [{data['name']}]", "magenta"))
        render.line(*parts)

    def _show_log(self, message: Message) -> None:
        if isinstance(message.data, dict):
            render.log_line(message.data)

    def watch(self) -> None:
        """Update the source on each save of its files, until Ctrl+C."""
        import watchfiles

        assert self.bundle is not None and self.entry is not None
        announced = False
        while True:
            watched = {os.path.normpath(p) for p in self.bundle.paths()}
            folders = sorted({os.path.dirname(p) for p in watched})
            armed = False
            for changes in watchfiles.watch(
                *folders,
                watch_filter=_relevant(watched),
                recursive=False,
                debounce=1600,
                step=50,
                rust_timeout=_ARMED_MS,
                yield_on_timeout=True,
            ):
                if not changes:  # a time-out: the watcher is armed
                    if not armed:
                        armed = True
                        if not announced:
                            announced = True
                            self._announce()
                        self.push()  # a save made before it was armed (unchanged: nothing sent)
                    continue
                before = self.bundle.paths()
                self.push()
                if self.bundle.paths() != before:
                    break  # the file set changed: watch the new folders

    def _announce(self) -> None:
        assert self.bundle is not None
        others = len(self.bundle.files)
        extra = f" (+{others} file{'s' if others > 1 else ''})" if others else ""
        render.note(
            f"Watching {self.bundle.entry_path}{extra}. Ready for updates! (Ctrl+C to stop)",
            style="bold",
        )

    def push(self) -> None:
        """Send the files as they are now, unless the server already has them."""
        assert self.entry is not None
        try:
            bundle = files.collect(self.entry)
        except CliError as exc:
            render.error(f"{exc.message}; the last good version keeps running")
            return
        body = bundle.body()
        if body == self.sent or not bundle.code.strip():
            return  # unchanged, or caught between an editor's truncate and its write
        try:
            with render.spinner("Updating…"):
                source = self.api.put(f"/v1/sources/{segment(self.source['id'])}", body)["data"]
        except CliError as exc:
            if exc.status is not None and exc.status < 500:
                self.sent = body  # its content is at fault: wait for the next save
            render.error(f"{exc.message}; the last good version keeps running")
            return
        self.sent, self.bundle, self.source = body, bundle, source
        component = source.get("component_id")
        render.line(
            (render.clock(time.time() * 1000) + " ", "dim"),
            ("Updated ", "bold green"),
            f"{source['id']} ({source.get('name_slug')}) to {component}",
        )


def _relevant(watched: set[str]) -> Callable[[Any, str], bool]:
    def relevant(_change: Any, changed: str) -> bool:
        # Also new code files beside them: a missing import may have just appeared.
        return os.path.normpath(changed) in watched or changed.endswith(_CODE_SUFFIXES)

    return relevant
