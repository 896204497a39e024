"""A prop's options while it is being configured: static ones, or its async ``options()`` run
in Node (``{"kind": "options"}``, docs/runner-protocol.md) with the values configured so far.

Configuration is partial while a user answers prompts, so the values are not checked as a
deploy checks them: any subset of the props may be given; app props' connected accounts are
resolved to ``$auth`` so ``options()`` can call the app's API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain.components import SavedComponent
from sluice.engine.auth.credentials import Credentials
from sluice.engine.components import invocations
from sluice.engine.components.components import Components, load_error, scrub_paths
from sluice.engine.state.data_stores import DataStores
from sluice.runtime import protocol
from sluice.runtime.port import Runner


@dataclass(frozen=True)
class OptionsRequest:
    prop: str
    configured_props: dict[str, Any]
    page: int = 0
    prev_context: Any = None
    query: str | None = None


@dataclass(frozen=True)
class OptionsPage:
    options: list[Any]
    #: What ``options()`` returned as ``context`` (pass it back as ``prev_context``), or None.
    context: Any = None


class Options:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        *,
        credentials: Credentials,
        stores: DataStores | None = None,
    ) -> None:
        self.db = db
        self.credentials = credentials
        #: Answers the data_store calls of options() (the caller's stores, never the owner's).
        self.stores = stores
        self.pool = pool
        self.components = components
        self.cipher = cipher
        self.settings = settings

    async def list(
        self,
        owner_id: str,
        component: SavedComponent,
        request: OptionsRequest,
        *,
        props: list[dict[str, Any]] | None = None,
    ) -> OptionsPage:
        """The options of one prop for ``owner_id`` (whose connected accounts app props name);
        the code runs in that account's runner. ``props``: the full prop list when
        ``additionalProps()`` adds to the component's own."""
        props = component.configurable_props if props is None else props
        prop = next((p for p in props if p["name"] == request.prop), None)
        if prop is None:
            raise errors.NotFound(
                f"{component.id} ({component.name}) has no prop {request.prop!r}", field="prop"
            )
        if not prop.get("remoteOptions"):
            if isinstance(prop.get("options"), list):
                return OptionsPage(list(prop["options"]))
            raise errors.InvalidRequest(f"prop {request.prop!r} has no options", field="prop")
        values = await node_values(self.credentials, owner_id, props, request.configured_props)
        entry = await self.components.materialize(component)
        result = await self.pool.invoke(
            invocations.of_component(
                self.settings,
                owner_id,
                component,
                entry,
                {
                    "kind": "options",
                    "prop": request.prop,
                    "page": request.page,
                    "prevContext": request.prev_context,
                    "query": request.query,
                    "props": values,
                    "db": {},
                },
                timeout_s=self.settings.action_timeout_seconds,
                on_store=self.stores.runner_call(owner_id) if self.stores else None,
            )
        )
        if not result.ok:
            error = result.error or {}
            if error.get("code") == protocol.LOAD_FAILED:
                raise load_error(result, entry.parent)
            message = scrub_paths(str(error.get("message", "")), entry.parent)
            raise errors.InvalidProps(
                f"the options of prop {request.prop!r} failed: "
                f"{error.get('name', 'Error')}: {message}",
                field=f"configured_props.{request.prop}",
                details={"error": {**error, "stack": None}, "logs": result.logs},
            )
        return page_of(result.value, request.prop)


async def node_values(
    credentials: Credentials,
    owner_id: str,
    props: list[dict[str, Any]],
    configured: dict[str, Any],
    *,
    unknown_ok: bool = False,
) -> dict[str, Any]:
    """Values configured so far as Node takes them: app props' connected accounts resolved to
    ``{$auth}`` (an app whose ``auth_type`` is none needs none: ``{}``); a name that is not a
    prop is refused, or (``unknown_ok``: a prop ``additionalProps()`` may add) passed as it is."""
    known = {p["name"]: p for p in props}
    values: dict[str, Any] = {}
    for name, value in configured.items():
        prop = known.get(name)
        if prop is None and not unknown_ok:
            raise errors.InvalidProps(f"unknown prop {name!r}", field=f"configured_props.{name}")
        if value is None:
            continue
        if prop is None or prop["type"] != "app":
            values[name] = value
            continue
        account = value.get("authProvisionId") if isinstance(value, dict) else None
        if account is None and await credentials.catalog.auth_free([prop]):
            continue  # an app that takes no account: Node gives its $auth as {}
        found = await credentials.auth(owner_id, account) if isinstance(account, str) else None
        if found is None or found[0] != prop.get("app"):
            raise errors.InvalidProps(
                f"prop {name!r} needs one of this account's connected {prop.get('app')} "
                'accounts: {"authProvisionId": "apn_..."}',
                field=f"configured_props.{name}",
            )
        values[name] = {"$auth": found[1]}
    return values


def page_of(value: Any, prop: str) -> OptionsPage:
    """What ``options()`` returned, as a page: an array, or ``{options, context}``."""
    if value is None:
        return OptionsPage([])
    if isinstance(value, list):
        return OptionsPage(value)
    if isinstance(value, dict) and isinstance(value.get("options"), list):
        return OptionsPage(value["options"], value.get("context"))
    raise errors.InvalidComponent(
        f"the options of prop {prop!r} must return an array, or {{options: [...], context}}",
        field=f"props.{prop}.options",
    )
