"""``sluice webhooks``: URLs that subscriptions deliver events to (``/v1/webhooks``), and
their deliveries: the dead ones (every retry failed) listed and retried (docs/api.md,
"Webhooks"; docs/deploy.md, "Webhook deliveries")."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sluice.cli import config, render
from sluice.cli.client import Client, segment

app = typer.Typer(
    help="Webhooks: URLs your sources' and workflows' events are POSTed to; their deliveries.",
    no_args_is_help=True,
)

WebhookArg = Annotated[str, typer.Argument(help="The webhook's id (wh_…).")]


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="webhooks")


@app.command("list")
def list_(
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the account's webhooks."""
    items = Client(config.resolve(profile)).get("/v1/users/me/webhooks")["data"]
    if json_:
        render.data(items)
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "URL", "CREATED"):
        table.add_column(column, overflow="fold")
    for hook in items:
        table.add_row(
            hook["id"], hook.get("name") or "", hook["url"], render.date(hook["created_at"])
        )
    render.print_table(table, len(items), "no webhooks: sluice webhooks create URL")


@app.command()
def create(
    url: Annotated[str, typer.Argument(help="Where events are POSTed (http or https).")],
    name: Annotated[str | None, typer.Option(help="A name to tell it by.")] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Create a webhook; subscribe it to a source or workflow with `sluice subscriptions
    create --emitter dc_… --listener wh_…`."""
    api = Client(config.resolve(profile))
    hook = api.request("POST", "/v1/webhooks", params={"url": url, "name": name})["data"]
    if json_:
        render.data(hook)
        return
    render.line(("Created", "bold"), f" {hook['id']} → {hook['url']}")


@app.command()
def delete(webhook: WebhookArg, profile: config.ProfileOpt = config.DEFAULT_PROFILE) -> None:
    """Delete a webhook, its deliveries and the subscriptions to it."""
    Client(config.resolve(profile)).delete(f"/v1/webhooks/{segment(webhook)}")
    render.line(("Deleted", "bold"), f" {webhook}")


def _deliveries_table(items: list[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "STATUS", "ATTEMPTS", "EVENT", "CREATED", "LAST ERROR"):
        table.add_column(column, overflow="fold")
    styles = {"dead": "red", "pending": "yellow", "delivered": "green"}
    for d in items:
        table.add_row(
            d["id"],
            Text(d["status"], styles.get(d["status"], "")),
            str(d["attempts"]),
            d.get("event_id") or "",
            render.date(d.get("created_at")),
            d.get("last_error") or "",
        )
    render.print_table(table, len(items), "no deliveries")


@app.command()
def deliveries(
    webhook: WebhookArg,
    status: Annotated[
        str | None,
        typer.Option(help="dead (every retry failed), pending or delivered; all when left out."),
    ] = "dead",
    all_: Annotated[bool, typer.Option("--all", help="Every status, not only dead.")] = False,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List a webhook's deliveries, newest first: by default the dead ones, which a retry
    sends again (`sluice webhooks retry`).

    Example: sluice webhooks deliveries wh_Ab3 --status pending
    """
    api = Client(config.resolve(profile))
    items = list(
        api.pages(f"/v1/webhooks/{segment(webhook)}/deliveries", status=None if all_ else status)
    )
    if json_:
        render.data(items)
        return
    _deliveries_table(items)


@app.command()
def retry(
    webhook: WebhookArg,
    delivery_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Dead deliveries (dlv_…) to retry; every dead one when none given."),
    ] = None,
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """Send dead deliveries again, now, with a new retry schedule. Each keeps its id, the
    Idempotency-Key its receiver saw before.

    Example: sluice webhooks retry wh_Ab3            (all the dead ones)
    """
    api = Client(config.resolve(profile))
    base = f"/v1/webhooks/{segment(webhook)}/deliveries"
    retried: list[str] = []
    if delivery_ids:
        for delivery_id in delivery_ids:
            retried += api.post(f"{base}/{segment(delivery_id)}/retry")["data"]["retried"]
    else:
        retried = api.post(f"{base}/retry")["data"]["retried"]
    if json_:
        render.data({"retried": retried, "count": len(retried)})
        return
    if not retried:
        render.line(f"No dead deliveries of {webhook} to retry.")
        return
    render.line(("Retrying", "bold"), f" {len(retried)} deliveries of {webhook}")
