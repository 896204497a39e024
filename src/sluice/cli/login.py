"""``sluice login`` and ``sluice logout``: the profiles of the config file (cli/config.py)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sluice.cli import config, render
from sluice.cli.client import Client
from sluice.errors import CliError


def register(app: typer.Typer) -> None:
    app.command()(login)
    app.command()(logout)


def login(
    base_url: Annotated[
        str | None, typer.Option(help="Sluice's address, e.g. http://127.0.0.1:8000 (asked).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(help="An API key (asked, hidden); - reads it from stdin."),
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Log in: check a base URL and API key, and store them under a profile.

    The key is checked with GET /v1/users/me, then written to the config file (mode 0600):
    $SLUICE_CONFIG, else $XDG_CONFIG_HOME/sluice/config, else ~/.config/sluice/config.

    Example: sluice login --profile work --base-url https://sluice.example.com
    """
    stored = config.load().get(profile, {})
    interactive = sys.stdin.isatty()
    if base_url is None:
        default = stored.get("base_url") or config.DEFAULT_BASE_URL
        base_url = typer.prompt("Base URL", default=default, err=True) if interactive else default
    if api_key == "-":
        api_key = sys.stdin.readline().strip()
    elif api_key is None:
        if not interactive:
            raise CliError(
                "give --api-key KEY (or --api-key - to read it from stdin)", code="usage"
            )
        api_key = typer.prompt("API key", hide_input=True, err=True)
    base_url = base_url.strip().rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise CliError(f"base URL {base_url!r} must start with http:// or https://", code="usage")
    if not api_key:
        raise CliError("the API key is empty", code="usage")
    checked = config.Credentials(base_url, api_key.strip(), profile, "--api-key")
    api = Client(checked)
    try:
        user = api.get("/v1/users/me")["data"]
    except CliError as exc:
        if exc.status == 401:
            raise CliError(
                f"{base_url} refused that API key: check it (`sluice accounts create` prints "
                "one; only its hash is stored)",
                code="unauthorized",
                status=401,
            ) from exc
        raise
    file = config.store(profile, base_url, checked.api_key)
    if json_:
        render.data({"profile": profile, "base_url": base_url, "config": str(file), "user": user})
        return
    email = f" ({user['email']})" if user.get("email") else ""
    render.line(
        ("Logged in as ", "green"), (str(user.get("username")), "bold"), email, f" on {base_url}"
    )
    render.note(f"profile {profile!r} saved in {file}")


def logout(profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Log out: remove a profile's API key from the config file.

    Example: sluice logout --profile work
    """
    if config.forget(profile):
        render.line(f"Logged out: removed the API key of profile {profile!r} from {config.path()}")
    else:
        render.note(f"profile {profile!r} has no API key in {config.path()}")
