"""Running an action by itself (``POST /v1/actions/run``), as Pipedream Connect does.

Workflows run actions as steps; this call runs one with configured props and optional
``steps`` data, and answers with its exports, return value, ``$.respond`` and logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import props as prop_rules
from sluice.domain.components import SavedComponent
from sluice.engine.auth.credentials import Credentials
from sluice.engine.components import invocations
from sluice.engine.components.components import Components, scrub_paths
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.engine.state.data_stores import DataStores
from sluice.runtime import protocol
from sluice.runtime.port import Runner
from sluice.runtime.protocol import Response, Result


@dataclass
class ActionRun:
    id: str
    result: Result
    responses: list[Response] = field(default_factory=list)


class Actions:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        components: Components,
        cipher: Cipher,
        settings: Settings,
        *,
        credentials: Credentials,
        dynamic: DynamicProps,
        stores: DataStores | None = None,
    ) -> None:
        self.db = db
        self.credentials = credentials
        self.dynamic = dynamic
        #: Answers the action's data_store calls.
        self.stores = stores
        self.pool = pool
        self.components = components
        self.cipher = cipher
        self.settings = settings

    async def run(
        self,
        component: SavedComponent,
        configured_props: Any,
        steps: Any = None,
        *,
        owner_id: str | None = None,
    ) -> ActionRun:
        """Run ``component`` for ``owner_id`` (default its owner): a registry action runs in
        the caller's runner, with the caller's connected accounts."""
        owner_id = owner_id or component.owner_id
        if component.component_type != "action":
            raise errors.InvalidRequest(
                f"{component.id} ({component.name}) is a source; deploy it with POST /v1/sources",
                field="component_id",
            )
        if steps is not None and not isinstance(steps, dict):
            raise errors.InvalidRequest("steps must be an object", field="steps")
        props = await self.dynamic.props_for(owner_id, component, configured_props)
        configured = prop_rules.check_configured(
            props,
            configured_props,
            max_bytes=self.settings.max_prop_bytes,
            auth_free=await self.dynamic.catalog.auth_free(props),
        )
        values = await self._values(owner_id, configured)
        entry = await self.components.materialize(component)
        run = ActionRun(ids.random_token(27), Result(ok=False))
        try:
            run.result = await self.pool.invoke(
                invocations.of_component(
                    self.settings,
                    owner_id,
                    component,
                    entry,
                    {
                        "kind": "action",
                        "props": values,
                        "db": {},
                        "steps": steps or {},
                        "context": {"id": run.id, "owner_id": owner_id},
                    },
                    timeout_s=self.settings.action_timeout_seconds,
                    on_store=self.stores.runner_call(owner_id) if self.stores else None,
                ),
                run.responses.append,
            )
        except errors.RunnerCrashed as exc:
            # Run by hand: the caller sees the crash as the run's error, as with a source.
            run.result = Result.failure(protocol.RUNNER_CRASHED, exc.message)
        if run.result.error and run.result.error.get("stack"):
            run.result.error["stack"] = scrub_paths(run.result.error["stack"], entry.parent)
        return run

    async def _values(self, owner_id: str, configured: prop_rules.Configured) -> dict[str, Any]:
        """The values Node takes: app props' accounts (``owner_id``'s) as ``{$auth}``."""
        values: dict[str, Any] = {**configured.plain, **configured.secret}
        for prop, (account_id, app) in configured.apps.items():
            found = await self.credentials.auth(owner_id, account_id)
            if found is None or found[0] != app:
                raise errors.InvalidProps(
                    f"prop {prop!r} needs a connected {app} account; {account_id} is not one"
                    " of this account's",
                    field=f"configured_props.{prop}",
                )
            values[prop] = {"$auth": found[1]}
        return values
