"""``sluice publish``: save a component to the account (or the public registry) by its key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sluice.cli import config, files, render
from sluice.cli.client import Client


def register(app: typer.Typer) -> None:
    app.command()(publish)


def publish(
    file: Annotated[Path, typer.Argument(help="The component's entry file.")],
    registry: Annotated[
        bool,
        typer.Option(
            "--registry", help="Publish to the public registry (admin keys only; semver)."
        ),
    ] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Publish an action (or a source) to the account, or to the public registry.

    Workflows and deploys use it by key. Publishing again saves a new version (a new sc_ id,
    the same key); lookups by key take the newest.

    Example: sluice publish actions/send-message/send-message.mjs
    """
    bundle = files.collect(file)
    api = Client(config.resolve(profile))
    path = "/v1/components/registry" if registry else "/v1/components"
    with render.spinner(f"Publishing {bundle.entry_path}…"):
        saved = api.post(path, bundle.body())["data"]
    if json_:
        render.data(saved)
        return
    where = "the public registry" if registry else "the account"
    render.line(
        ("Published ", "bold green"),
        (saved["id"], "bold"),
        f" to {where}: {saved.get('name')} {saved.get('version')} ({saved.get('component_type')})",
    )
    key = saved.get("key")
    if not key:
        render.warn(f"it has no key: refer to it by its id, {saved['id']}")
    elif saved.get("component_type") == "source":
        render.line("  Deploy it: ", (f"sluice deploy {key}", "bold"))
    else:
        render.line("  Key:       ", (key, "bold"), " (workflows use the newest version)")
    for warning in saved.get("warnings") or []:
        render.warn(str(warning.get("message", warning) if isinstance(warning, dict) else warning))
