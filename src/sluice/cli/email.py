"""``sluice email``: the account's e-mail address, where ``$.send.email`` and the global error
workflow send (``/v1/users/me``, docs/api.md). Mail goes only to a verified address."""

from __future__ import annotations

from typing import Annotated

import typer

from sluice.cli import config, render
from sluice.cli.client import Client

app = typer.Typer(
    help="Your account's e-mail address ($.send.email sends only to it, once verified).",
    no_args_is_help=True,
)


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="email")


@app.command("set")
def set_(
    address: Annotated[str, typer.Argument(help="The new address (it starts unverified).")],
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Change the address, then mail it a verification link.

    Example: sluice email set me@example.com
    """
    client = Client(config.resolve(profile))
    client.put("/v1/users/me", {"email": address})
    sent = client.post("/v1/users/me/email/verification")
    render.line(("Sent", "bold"), f" a verification link to {sent['data']['sent_to']}")


@app.command()
def verify(profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Mail a verification link to the account's address; open it to allow $.send.email."""
    sent = Client(config.resolve(profile)).post("/v1/users/me/email/verification")
    render.line(("Sent", "bold"), f" a verification link to {sent['data']['sent_to']}")


@app.command()
def show(profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """The address and whether it is verified."""
    me = Client(config.resolve(profile)).get("/v1/users/me")["data"]
    state = "verified" if me.get("email_verified") else "not verified"
    render.line(str(me.get("email") or "(none)"), (f" ({state})", "dim"))
