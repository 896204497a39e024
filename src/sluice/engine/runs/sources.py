"""Source lifecycle: deploy (``deploy`` then ``activate`` hooks), run by hand, delete.

Deploy stores the deployment first (the hooks' db writes and emits need its row), then runs the
hooks; a hook that throws undoes the deployment and answers ``hook_failed`` with its error.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain import components as rules
from sluice.domain import props as prop_rules
from sluice.domain import registry as registry_rules
from sluice.domain import schedules, text
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.domain.jobs import Ticked
from sluice.domain.paging import Page
from sluice.engine.components import dynamic_props
from sluice.engine.components.components import ComponentInput, Components
from sluice.engine.components.directory import EndpointDirectory
from sluice.engine.components.dynamic_props import DynamicProps
from sluice.engine.components.subscriptions import auto_subscribe
from sluice.engine.runs import source_props
from sluice.engine.runs.invoker import InvocationOutcome, Invoker, secret_aad
from sluice.runtime.port import Runner
from sluice.storage import components as component_store
from sluice.storage import database, events, sources, subscriptions, timers

log = logging.getLogger(__name__)

#: A source's name: its column's size.
NAME_CHARS = 300


@dataclass(frozen=True)
class DeployRequest:
    component_id: str | None = None
    component_key: str | None = None
    source: ComponentInput | None = None
    name: str | None = None
    configured_props: Any = None
    active: bool = True


@dataclass(frozen=True)
class UpdateRequest:
    """``PUT /v1/sources/{id}``: every field optional; ``component`` is new code (any of
    component_id, component_key, component_code/url), ``configured_props`` the full new set
    (secret props left out keep their stored values)."""

    component: DeployRequest | None = None
    name: str | None = None
    configured_props: dict[str, Any] | None = None
    active: bool | None = None


class Sources:
    def __init__(
        self,
        db: AsyncEngine,
        reader: database.Reader,
        pool: Runner,
        components: Components,
        invoker: Invoker,
        cipher: Cipher,
        settings: Settings,
        clock: Clock,
        directory: EndpointDirectory,
        dynamic: DynamicProps,
    ) -> None:
        self.db = db
        #: The full prop list of components with ``additionalProps()``.
        self.dynamic = dynamic
        self.reader = reader
        #: Told after each commit that changes a source, so its endpoint answers accordingly.
        self.directory = directory
        self.pool = pool
        self.components = components
        self.invoker = invoker
        self.cipher = cipher
        self.settings = settings
        self.clock = clock

    async def resolve_component(self, owner_id: str, request: DeployRequest) -> SavedComponent:
        if request.component_id:
            async with self.db.connect() as conn:
                found = await component_store.get_deployable(conn, owner_id, request.component_id)
            if found is None:
                raise errors.NotFound(
                    f"component {request.component_id} not found", field="component_id"
                )
            return found
        if request.component_key:
            async with self.db.connect() as conn:
                found = await component_store.get_by_key(conn, owner_id, request.component_key)
                if found is None:  # not the account's own: the public registry's newest
                    versions = await component_store.registry_versions(conn, request.component_key)
                    newest = registry_rules.latest([c.version for c in versions])
                    found = next((c for c in versions if c.version == newest), None)
            if found is None:
                raise errors.NotFound(
                    f"no component with key {request.component_key!r} in the account or the "
                    "public registry",
                    field="component_key",
                )
            return found
        if request.source is not None:
            return await self.components.save(owner_id, request.source)
        raise errors.InvalidRequest(
            "give component_id, component_key, component_code or component_url",
            field="component_id",
        )

    async def deploy(self, owner_id: str, request: DeployRequest) -> Deployment:
        component = await self.resolve_component(owner_id, request)
        if component.component_type != "source":
            raise errors.InvalidRequest(
                f"{component.id} ({component.name}) is an action; only sources deploy "
                "(actions run as workflow steps)",
                field="component_id",
            )
        props, configured = await self._configured(owner_id, component, request.configured_props)
        async with self.db.begin() as conn:
            await source_props.check_apps(conn, self.cipher, owner_id, configured)
            deployment = await self._insert(conn, owner_id, component, request, configured, props)
        hooks = ["deploy", "activate"] if request.active else ["deploy"]
        try:
            for hook in hooks:
                await self._hook(deployment, component, hook)
        except BaseException:
            await self._remove(deployment)
            raise
        log.info(
            "source deployed",
            extra={
                "action": "source_deployed",
                "deployment_id": deployment.id,
                "owner_id": owner_id,
            },
        )
        return deployment

    async def _insert(
        self,
        conn: AsyncConnection,
        owner_id: str,
        component: SavedComponent,
        request: DeployRequest,
        configured: prop_rules.Configured,
        props: list[dict[str, Any]],
    ) -> Deployment:
        """The new deployment's row and its timer (hooks run after the commit); ``props``
        the full list (an HTTP interface ``additionalProps()`` adds gets an endpoint too)."""
        name = request.name or component.name
        if not isinstance(name, str) or not name.strip():
            raise errors.InvalidRequest("name must be a non-empty string", field="name")
        text.check_name(name, "name", NAME_CHARS)
        now_s = self.clock.now_ms() // 1000
        deployment_id = ids.new_id("dc")
        endpoint_id = ids.random_token(20).lower() if source_props.has_http(props) else None
        url = self.invoker.endpoint_url(endpoint_id)
        deployment = Deployment(
            id=deployment_id,
            owner_id=owner_id,
            component_id=component.id,
            name=name,
            name_slug="",
            configured_props={
                **configured.plain,
                **source_props.added_endpoints(component, props, url),
            },
            secret_props=self._encrypt(deployment_id, configured.secret),
            active=request.active,
            endpoint_id=endpoint_id,
            dedupe_state=None,
            created_at=now_s,
            updated_at=now_s,
        )
        deployment = await sources.with_free_slug(conn, deployment, name, sources.insert)
        await self._sync_timer(conn, deployment, props)
        await auto_subscribe(conn, owner_id, deployment_id, now_s)
        return deployment

    async def update(self, owner_id: str, deployment_id: str, request: UpdateRequest) -> Deployment:
        """The spec's Update: ``deactivate``, code and props replaced, ``activate``; the id
        stays. Toggling ``active`` alone runs just the matching hook. Everything is checked
        before any hook runs, so a bad request changes nothing."""
        current = await self.get(owner_id, deployment_id)
        old = await self.components.by_id(current.component_id)
        new = old
        if request.component is not None:
            new = await self.resolve_component(owner_id, request.component)
            if new.component_type != "source":
                raise errors.InvalidRequest(
                    f"{new.id} ({new.name}) is an action; a source's code must be a source",
                    field="component_id",
                )
        replacing = new.id != old.id or request.configured_props is not None
        active = current.active if request.active is None else request.active
        updated, props = current, new.configurable_props
        if replacing:
            updated, props = await self._replaced(owner_id, current, new, request)
        elif active and dynamic_props.is_dynamic(new):  # a timer additionalProps() adds
            props = await self._props_now(owner_id, current, new)
        if request.name is not None and request.name != current.name:
            if not request.name.strip():
                raise errors.InvalidRequest("name must be a non-empty string", field="name")
            text.check_name(request.name, "name", NAME_CHARS)
            updated = updated.with_changes(name=request.name)
        if current.active and (replacing or not active):
            await self._hook(current, old, "deactivate")
        async with self.db.begin() as conn:
            updated = updated.with_changes(active=active, updated_at=self.clock.now_ms() // 1000)
            renamed = updated.name != current.name
            if renamed and sources.slugify(updated.name) != current.name_slug:
                updated = await sources.with_free_slug(conn, updated, updated.name, sources.update)
            else:
                await sources.update(conn, updated)
            await self._sync_timer(conn, updated, props)
        self.directory.forget(current.endpoint_id)
        if replacing:
            await self.pool.evict(owner_id, f"{current.id}:*")
        if active and (replacing or not current.active):
            await self._activate(updated, new, current.endpoint_id)
        return updated

    async def _replaced(
        self, owner_id: str, current: Deployment, new: SavedComponent, request: UpdateRequest
    ) -> tuple[Deployment, list[dict[str, Any]]]:
        """The deployment with the new code and props, checked (nothing stored yet), and the
        full prop list."""
        values = source_props.values_for_update(
            self.cipher,
            current,
            new,
            request.configured_props,
            self.invoker.endpoint_url(current.endpoint_id),
        )
        props, configured = await self._configured(owner_id, new, values)
        async with self.db.connect() as conn:
            await source_props.check_apps(conn, self.cipher, owner_id, configured)
        endpoint_id = None
        if source_props.has_http(props):
            endpoint_id = current.endpoint_id or ids.random_token(20).lower()
        url = self.invoker.endpoint_url(endpoint_id)
        replaced = current.with_changes(
            component_id=new.id,
            configured_props={**configured.plain, **source_props.added_endpoints(new, props, url)},
            secret_props=self._encrypt(current.id, configured.secret),
            endpoint_id=endpoint_id,
        )
        return replaced, props

    async def _props_now(
        self, owner_id: str, current: Deployment, component: SavedComponent
    ) -> list[dict[str, Any]]:
        """The full prop list for the source's stored values (``additionalProps()`` run)."""
        url = self.invoker.endpoint_url(current.endpoint_id)
        values = source_props.values_for_update(self.cipher, current, component, None, url)
        return await self.dynamic.props_for(owner_id, component, values)

    async def _configured(
        self, owner_id: str, component: SavedComponent, values: Any
    ) -> tuple[list[dict[str, Any]], prop_rules.Configured]:
        """The full prop list (``additionalProps()`` included), ``values`` checked against it."""
        props = await self.dynamic.props_for(owner_id, component, values)
        return props, prop_rules.check_configured(
            props,
            values,
            max_bytes=self.settings.max_prop_bytes,
            min_timer_interval_seconds=self.settings.timer_min_interval_seconds,
            auth_free=await self.dynamic.catalog.auth_free(props),
        )

    async def _activate(
        self, updated: Deployment, component: SavedComponent, endpoint_id: str | None
    ) -> None:
        """Run the ``activate`` hook of an updated source; if it fails, leave it inactive."""
        try:
            await self._hook(updated, component, "activate")
        except errors.HookFailed as exc:
            async with self.db.begin() as conn:
                inactive = updated.with_changes(active=False)
                await sources.update(conn, inactive)
                await self._sync_timer(conn, inactive, component.configurable_props)
            self.directory.forget(endpoint_id)
            exc.message += "; the source was updated and left inactive"
            raise

    async def _sync_timer(
        self, conn: AsyncConnection, deployment: Deployment, props: list[dict[str, Any]]
    ) -> None:
        """The source's timer as its timer prop says; ``props`` the full prop list (a timer
        ``additionalProps()`` adds is scheduled too)."""
        await timers.sync(
            conn,
            deployment_id=deployment.id,
            owner_id=deployment.owner_id,
            ticked=Ticked.SOURCE,
            schedule=schedules.configured_timer(props, deployment.configured_props),
            active=deployment.active,
            now_ms=self.clock.now_ms(),
        )

    async def list(
        self, owner_id: str, *, limit: int, before: str | None, after: str | None
    ) -> Page[Deployment]:
        async with self.db.connect() as conn:
            return await sources.page(conn, owner_id, limit=limit, before=before, after=after)

    async def _hook(self, deployment: Deployment, component: SavedComponent, hook: str) -> None:
        if hook not in (component.shape.get("hooks") or []):
            return
        outcome = await self.invoker.invoke(deployment, {"kind": "hook", "hook": hook})
        if not outcome.result.ok:
            error: dict[str, Any] = outcome.result.error or {}
            raise errors.HookFailed(
                f"the {hook} hook threw {error.get('name', 'Error')}: {error.get('message', '')}",
                field=f"hooks.{hook}",
                details={"error": error, "logs": outcome.result.logs},
            )

    def _encrypt(self, deployment_id: str, secrets: dict[str, Any]) -> dict[str, str]:
        aad = secret_aad
        return {
            k: self.cipher.encrypt(json.dumps(v), aad(deployment_id, k)) for k, v in secrets.items()
        }

    async def get(self, owner_id: str, deployment_id: str) -> Deployment:
        async with self.db.connect() as conn:
            found = await sources.get(conn, owner_id, deployment_id)
            if found is None and not ids.has_prefix(deployment_id, "dc"):
                found = await sources.get_by_slug(conn, owner_id, deployment_id)
        if found is None:
            raise errors.NotFound(f"source {deployment_id} not found")
        return found

    async def run(self, owner_id: str, deployment_id: str, event: Any = None) -> InvocationOutcome:
        found = await self.reader(
            lambda conn: sources.get_with_state(conn, owner_id, deployment_id)
        )
        if found is None:
            # A name slug, or nothing: the slow path answers both.
            deployment, snapshot = await self.get(owner_id, deployment_id), None
        else:
            deployment, snapshot = found
        component = await self.components.by_id(deployment.component_id)
        if event is None:
            event = self._default_event(deployment, component)
        return await self.invoker.invoke(
            deployment, {"kind": "run", "event": event}, snapshot=snapshot
        )

    def _default_event(self, deployment: Deployment, component: SavedComponent) -> Any:
        timers = [p["name"] for p in component.configurable_props if p["type"] == rules.TIMER]
        if not timers:
            return {}
        interval = (deployment.configured_props.get(timers[0]) or {}).get("intervalSeconds")
        return {"timestamp": self.clock.now_ms() // 1000, "interval_seconds": interval}

    async def delete(self, owner_id: str, deployment_id: str) -> str | None:
        """The spec's Delete: ``deactivate`` runs, then the source goes, even when the hook
        throws (what it threw is returned): else such a source could never be deleted."""
        deployment = await self.get(owner_id, deployment_id)
        component = await self.components.by_id(deployment.component_id)
        failed = None
        if deployment.active:
            try:
                await self._hook(deployment, component, "deactivate")
            except errors.HookFailed as exc:
                failed = f"{exc.message}; the source was deleted anyway"
                log.warning("source %s: %s", deployment.id, failed)
        await self._remove(deployment)
        return failed

    async def _remove(self, deployment: Deployment) -> None:
        async with self.db.begin() as conn:
            await sources.delete(conn, deployment.id)
            await events.delete_all(conn, deployment.id)
            await subscriptions.delete_for_source(conn, deployment.id)
        self.directory.forget(deployment.endpoint_id)
        await self.pool.evict(deployment.owner_id, f"{deployment.id}:*")


__all__ = ["DeployRequest", "Sources"]
