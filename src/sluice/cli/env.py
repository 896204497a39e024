"""``sluice env``: the account's environment variables, the ``process.env`` of its workflows'
code steps (``/v1/env_vars``, docs/api.md). Values are write-only: ``list`` shows names."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sluice.cli import config, render
from sluice.cli.client import Client, segment

app = typer.Typer(
    help="Environment variables of your workflows (process.env in code steps).",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(help="The variable's name, e.g. API_TOKEN.")]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="env")


@app.command("set")
def set_(
    name: NameArg,
    value: Annotated[
        str | None,
        typer.Argument(help="The value; leave it out to type it hidden (or pipe it in)."),
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Set a variable (replacing its value). Its value is never shown again.

    Example: sluice env set API_TOKEN   (asks for the value, hidden)
    """
    if value is None:
        if sys.stdin.isatty():
            value = typer.prompt(f"Value of {name}", hide_input=True, err=True)
        else:
            value = sys.stdin.read().rstrip("\n")
    Client(config.resolve(profile)).put(f"/v1/env_vars/{segment(name)}", {"value": value})
    render.line(("Set", "bold"), f" {name}")


@app.command()
def unset(name: NameArg, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Delete a variable."""
    Client(config.resolve(profile)).delete(f"/v1/env_vars/{segment(name)}")
    render.line(("Deleted", "bold"), f" {name}")


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the variables' names (values are never shown)."""
    items = Client(config.resolve(profile)).get("/v1/users/me/env_vars")["data"]
    if json_:
        render.data(items)
        return
    if not items:
        render.line("No environment variables. Set one with `sluice env set NAME`.")
    for item in items:
        render.line((item["name"], "bold"))
