"""``sluice oauth-clients``: the account's OAuth API clients, whose id and secret a script
exchanges for short-lived bearer tokens (``POST /v1/oauth/token``, ``client_credentials``;
docs/api.md, "OAuth API clients"). The secret is shown once, at creation."""

from __future__ import annotations

from typing import Annotated

import typer

from sluice.cli import config, render
from sluice.cli.client import Client, segment

app = typer.Typer(
    help="OAuth API clients: a client id and secret a script exchanges for bearer tokens.",
    no_args_is_help=True,
)


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="oauth-clients")


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="What to call it, e.g. 'deploy script'.")],
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Make a client; its secret is printed this once.

    Example: sluice oauth-clients create "deploy script"
    """
    made = Client(config.resolve(profile)).post("/v1/oauth/clients", {"name": name})["data"]
    if json_:
        render.data(made)
        return
    render.line(("Created", "bold"), f" {made['name']}")
    render.line("client_id:     ", (made["client_id"], "bold"))
    render.line("client_secret: ", (made["client_secret"], "bold"), "  (shown only now)")


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the clients (never their secrets)."""
    items = Client(config.resolve(profile)).get("/v1/oauth/clients")["data"]
    if json_:
        render.data(items)
        return
    if not items:
        render.line('No OAuth clients. Make one with `sluice oauth-clients create "name"`.')
    for item in items:
        render.line((item["client_id"], "bold"), f"  {item['name']}")


@app.command()
def delete(
    client_id: Annotated[str, typer.Argument(help="The client's id, oc_….")],
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Delete a client: its tokens stop working at once."""
    Client(config.resolve(profile)).delete(f"/v1/oauth/clients/{segment(client_id)}")
    render.line(("Deleted", "bold"), f" {client_id}")
