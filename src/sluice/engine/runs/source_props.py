"""A source's configured props around a deploy or an update: the connected accounts they name,
the values an update starts from, and the endpoint of an HTTP interface ``additionalProps()``
adds.

An HTTP interface of the component's own ``props`` stores nothing: its endpoint is drawn from
the deployment's ``endpoint_id`` wherever it is shown or passed to Node. One that
``additionalProps()`` adds is known only with the configured values, so its value is stored,
in Pipedream's stored form ``{"endpoint_url": …}`` (Node reads it as ``this.<prop>.endpoint``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import errors
from sluice.crypto import Cipher
from sluice.domain import components as rules
from sluice.domain import props as prop_rules
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.engine.components.dynamic_props import is_dynamic
from sluice.engine.runs.invoker import secret_aad
from sluice.storage import apps


def has_http(props: list[dict[str, Any]]) -> bool:
    return any(p["type"] == rules.HTTP for p in props)


def added_endpoints(
    component: SavedComponent, props: list[dict[str, Any]], endpoint_url: str | None
) -> dict[str, Any]:
    """The stored values of the HTTP interfaces among ``props`` (the full list) that the
    component's own ``props`` lack."""
    own = {p["name"] for p in component.configurable_props}
    return {
        p["name"]: {"endpoint_url": endpoint_url}
        for p in props
        if p["type"] == rules.HTTP and p["name"] not in own
    }


def values_for_update(
    cipher: Cipher,
    current: Deployment,
    new: SavedComponent,
    given: dict[str, Any] | None,
    endpoint_url: str | None,
) -> dict[str, Any]:
    """The values to check: ``given``, or the current ones that the new code still has; a
    secret prop left out keeps its stored value. A stored endpoint is not a value: dropped."""
    known = {p["name"] for p in new.configurable_props}
    if is_dynamic(new):
        # Values of props additionalProps() added: checked against what it adds now.
        known |= set(current.configured_props) | set(current.secret_props)
    secrets = {
        name: json.loads(cipher.decrypt(token, secret_aad(current.id, name)))
        for name, token in current.secret_props.items()
    }
    if given is not None:
        values = dict(given)
    else:
        values = {k: v for k, v in current.configured_props.items() if k in known}
    values = {k: v for k, v in values.items() if v != {"endpoint_url": endpoint_url}}
    for name, value in secrets.items():
        if name in known and name not in values:
            values[name] = value
    for prop in new.configurable_props:
        if prop["type"] in (rules.HTTP, rules.DB):
            values.pop(prop["name"], None)
    return values


async def check_apps(
    conn: AsyncConnection, cipher: Cipher, owner_id: str, configured: prop_rules.Configured
) -> None:
    """Each connected account the app props name is ``owner_id``'s, of the prop's app."""
    for prop, (account_id, app) in configured.apps.items():
        account = await apps.get(conn, cipher, owner_id, account_id)
        if account is None:
            raise errors.InvalidProps(
                f"prop {prop!r}: connected account {account_id} not found",
                field=f"configured_props.{prop}",
            )
        if account.app != app:
            raise errors.InvalidProps(
                f"prop {prop!r} needs a {app} account; {account_id} is a {account.app} account",
                field=f"configured_props.{prop}",
            )
