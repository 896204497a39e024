"""``sluice subscriptions``: a workflow or source listening to another's events or errors
(``/v1/subscriptions``, docs/api.md). ``list`` is ``sluice list subscriptions``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sluice.cli import config, render
from sluice.cli.client import Client
from sluice.errors import CliError

app = typer.Typer(
    help="Subscriptions: forward one source's or workflow's events (or errors) to another.",
    no_args_is_help=True,
)

EmitterOpt = Annotated[
    str,
    typer.Option(
        "--emitter",
        help="The source (dc_…) or workflow (p_…) whose events are forwarded; "
        "'dc_*' or 'p_*' for all of them (quote the *).",
    ),
]
ListenerOpt = Annotated[
    str,
    typer.Option(
        "--listener",
        help="The workflow (p_…), source (dc_…) or webhook (wh_…) that receives them.",
    ),
]
ChannelOpt = Annotated[
    str,
    typer.Option(
        "--channel",
        help="The channel: '$errors' for a workflow's errors (quote the $); "
        "empty: the default one.",
    ),
]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="subscriptions")


def _link(emitter: str, listener: str, channel: str) -> dict[str, Any]:
    for name, value in (("--emitter", emitter), ("--listener", listener)):
        kinds = ("dc_", "p_", "wh_") if name == "--listener" else ("dc_", "p_")
        if not value.startswith(kinds):
            raise CliError(
                f"{name} {value!r}: give a source id (dc_…) or a workflow id (p_…); "
                "`sluice list` and `sluice workflows list` show them",
                code="usage",
            )
    return {"emitter_id": emitter, "listener_id": listener, "event_name": channel}


@app.command()
def create(
    emitter: EmitterOpt,
    listener: ListenerOpt,
    channel: ChannelOpt = "",
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Forward the emitter's events on a channel to the listener.

    Example: sluice subscriptions create --emitter 'p_*' --listener p_Ab3 --channel '$errors'
    """
    api = Client(config.resolve(profile))
    found = api.request("POST", "/v1/subscriptions", params=_link(emitter, listener, channel))
    if json_:
        render.data(found["data"])
        return
    render.subscriptions_table([found["data"]])


@app.command()
def delete(
    emitter: EmitterOpt,
    listener: ListenerOpt,
    channel: ChannelOpt = "",
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Stop forwarding the emitter's events on a channel to the listener.

    Example: sluice subscriptions delete --emitter dc_Ab3 --listener p_Cd4
    """
    api = Client(config.resolve(profile))
    api.request("DELETE", "/v1/subscriptions", params=_link(emitter, listener, channel))
    render.line(("Deleted", "bold"), f" the subscription of {listener} to {emitter}")


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the account's subscriptions (as `sluice list subscriptions`)."""
    items = Client(config.resolve(profile)).get("/v1/users/me/subscriptions")["data"]
    if json_:
        render.data(items)
        return
    render.subscriptions_table(items)
