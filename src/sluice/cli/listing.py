"""``sluice list``: the account's sources, components, subscriptions or workflows."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from sluice.cli import config, render, workflow_render
from sluice.cli.client import Client
from sluice.errors import CliError


class Kind(StrEnum):
    sources = "sources"
    components = "components"
    subscriptions = "subscriptions"
    workflows = "workflows"


#: pd's short forms too (``pd list so``).
_ALIASES = {
    "so": Kind.sources,
    "source": Kind.sources,
    "co": Kind.components,
    "component": Kind.components,
    "sub": Kind.subscriptions,
    "subscription": Kind.subscriptions,
    "subs": Kind.subscriptions,
    "wo": Kind.workflows,
    "workflow": Kind.workflows,
}


def register(app: typer.Typer) -> None:
    app.command("list")(list_)


def _complete(incomplete: str) -> list[str]:
    return [k.value for k in Kind if k.value.startswith(incomplete)]


def list_(
    kind: Annotated[
        str,
        typer.Argument(
            help="sources, components, subscriptions or workflows.", autocompletion=_complete
        ),
    ] = "sources",
    profile: config.ProfileOpt = config.DEFAULT_PROFILE,
    json_: render.JsonOpt = False,
) -> None:
    """List the account's sources (default), components, subscriptions, or workflows.

    Example: sluice list components --json
    """
    try:
        chosen = _ALIASES.get(kind) or Kind(kind)
    except ValueError as exc:
        raise CliError(
            f"cannot list {kind!r}: give sources, components, subscriptions or workflows",
            code="usage",
        ) from exc
    api = Client(config.resolve(profile))
    if chosen is Kind.subscriptions:
        items = api.get("/v1/users/me/subscriptions")["data"]
    else:
        items = list(api.pages(f"/v1/users/me/{chosen.value}"))
    if json_:
        render.data(items)
    elif chosen is Kind.sources:
        render.sources_table(items)
    elif chosen is Kind.components:
        render.components_table(items)
    elif chosen is Kind.workflows:
        workflow_render.workflows_table(items)
    else:
        render.subscriptions_table(items)
