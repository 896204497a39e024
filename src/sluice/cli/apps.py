"""``sluice apps``: the app catalog (list, show), an operator's apps (``set``: register or
edit, admin keys only), and connecting an OAuth account (``connect`` prints the URL to open).
docs/apps.md."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sluice.cli import config, render
from sluice.cli.client import Client
from sluice.errors import CliError

app = typer.Typer(
    help="Apps: the catalog, an operator's OAuth and key apps, connecting accounts.",
    no_args_is_help=True,
)

SlugArg = Annotated[str, typer.Argument(metavar="APP", help="The app's name slug, e.g. slack.")]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="apps")


@app.command("list")
def list_(
    query: Annotated[str | None, typer.Argument(help="Words to search for.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the apps of the catalog (those whose slug, name or description hold QUERY)."""
    items = Client(config.resolve(profile)).get("/v1/apps", q=query)["data"]
    if json_:
        render.data(items)
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("SLUG", "NAME", "AUTH", "CONNECT"):
        table.add_column(column, overflow="fold")
    for a in items:
        ready = Text("ready", "green") if a.get("connectable") else Text("needs a client", "yellow")
        table.add_row(a["name_slug"], a.get("name") or "", a.get("auth_type") or "", ready)
    render.print_table(table, len(items), "no apps match")


@app.command()
def show(slug: SlugArg, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Print one app as JSON (its OAuth settings without the client secret)."""
    render.data(Client(config.resolve(profile)).get(f"/v1/apps/{slug}")["data"])


def _field(spec: str) -> dict[str, Any]:
    """``name[:Label][:secret][:optional]``."""
    name, *rest = spec.split(":")
    flags = {p for p in rest if p in ("secret", "optional")}
    labels = [p for p in rest if p not in flags]
    return {
        "name": name,
        "label": labels[0] if labels else name,
        "secret": "secret" in flags,
        "optional": "optional" in flags,
    }


def _oauth(options: dict[str, Any]) -> dict[str, Any]:
    oauth = {k: v for k, v in options.items() if v is not None}
    if "scopes" in oauth:
        oauth["scopes"] = [s for scope in oauth["scopes"] for s in scope.split()]
    return oauth


@app.command("set")
def set_(
    slug: SlugArg,
    name: Annotated[str | None, typer.Option(help="Shown in lists.")] = None,
    auth_type: Annotated[str | None, typer.Option(help="oauth, keys or none.")] = None,
    description: Annotated[str | None, typer.Option()] = None,
    field: Annotated[
        list[str] | None,
        typer.Option(help="A key app's field: name[:Label][:secret][:optional] (repeat)."),
    ] = None,
    authorize_url: Annotated[str | None, typer.Option(help="OAuth 2 authorize URL.")] = None,
    token_url: Annotated[str | None, typer.Option(help="OAuth 2 token URL.")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="A scope to ask for (repeat).")] = None,
    pkce: Annotated[bool | None, typer.Option("--pkce/--no-pkce", help="Use PKCE (S256).")] = None,
    client_id: Annotated[str | None, typer.Option(help="The OAuth client id.")] = None,
    client_secret: Annotated[
        str | None,
        typer.Option(help="The OAuth client secret; '-' asks for it without echo."),
    ] = None,
    user_info_url: Annotated[
        str | None, typer.Option(help="Where the provider says who the user is.")
    ] = None,
    uid_field: Annotated[str | None, typer.Option(help="Dotted path of the user's id.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
) -> None:
    """Register an app, or edit one (a built-in too: add its client id and secret).

    Example: sluice apps set github --client-id Iv1.abc --client-secret -
    """
    if client_secret == "-":  # noqa: S105 - the ask-me marker, not a secret
        client_secret = typer.prompt("Client secret", hide_input=True, err=True)
    body: dict[str, Any] = {
        k: v
        for k, v in {"name": name, "auth_type": auth_type, "description": description}.items()
        if v is not None
    }
    if field:
        body["custom_fields"] = [_field(f) for f in field]
    oauth = _oauth(
        {
            "authorize_url": authorize_url,
            "token_url": token_url,
            "scopes": scope,
            "pkce": pkce,
            "client_id": client_id,
            "client_secret": client_secret,
            "user_info_url": user_info_url,
            "uid_field": uid_field,
        }
    )
    if oauth:
        body["oauth"] = oauth
    render.data(_save(Client(config.resolve(profile)), slug, body))


def _save(api: Client, slug: str, body: dict[str, Any]) -> Any:
    """``PUT`` an app that exists (a built-in too), else ``POST`` it."""
    try:
        api.get(f"/v1/apps/{slug}")
    except CliError as exc:
        if exc.code != "not_found":
            raise
        return api.post("/v1/apps", {"name_slug": slug, "name": slug, **body})["data"]
    return api.put(f"/v1/apps/{slug}", body)["data"]


@app.command()
def connect(
    slug: SlugArg,
    name: Annotated[str | None, typer.Option(help="The new account's name.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Start connecting an OAuth account: open the printed link in a browser (it works once),
    continue, and approve at the provider."""
    started = Client(config.resolve(profile)).post(
        f"/v1/apps/{slug}/connect", {"name": name} if name else {}
    )["data"]
    if json_:
        render.data(started)
        return
    render.note("Open this URL in a browser and approve; the account is then listed by")
    render.note(f"GET /v1/accounts?app={slug}.")
    render.line(started["authorize_url"])
