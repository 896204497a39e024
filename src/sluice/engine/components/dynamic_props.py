"""Dynamic props: a component's ``additionalProps()`` run with the values configured so far.

A prop with ``reloadProps: true`` tells a configuration form to ask again for the prop list once
it has a value; ``additionalProps(previousPropDefs)`` answers the props to add (Pipedream merges
them with ``props``). ``reload`` is Pipedream Connect's "reload props" call; ``props_for`` gives
deploys, updates and action runs the full prop list their values are checked against (the
runtime runs ``additionalProps()`` again on every invocation, so the values reach ``this``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sluice import errors
from sluice.config import Settings
from sluice.domain import components as rules
from sluice.domain.components import SavedComponent
from sluice.engine.auth.credentials import Credentials
from sluice.engine.components import invocations
from sluice.engine.components.components import Components, load_error, scrub_paths
from sluice.engine.components.options import node_values
from sluice.runtime import protocol
from sluice.runtime.port import Runner

#: Interface props take no user value; Node builds them itself.
_NOT_PASSED = frozenset({rules.HTTP, rules.DB, rules.APPHOOK, "alert"})


@dataclass(frozen=True)
class PropSet:
    """The full prop list for some configured values."""

    #: ``dyp_`` and a digest of the component and the list: the same values give the same id.
    id: str
    props: list[dict[str, Any]]
    #: ``additionalProps()`` threw: its error (the list is then the component's own props).
    errors: list[str] = field(default_factory=list)


def is_dynamic(component: SavedComponent) -> bool:
    return bool(component.shape.get("has_additional_props"))


class DynamicProps:
    def __init__(
        self, components: Components, settings: Settings, *, credentials: Credentials
    ) -> None:
        #: additionalProps() runs where the component's other code runs: its runner pool.
        self.pool: Runner = components.pool
        self.components = components
        self.settings = settings
        #: App props' ``$auth``, so additionalProps() can call the app's API.
        self.credentials = credentials
        #: Which app props need no connected account (apps whose ``auth_type`` is none).
        self.catalog = credentials.catalog

    async def reload(
        self, owner_id: str, component: SavedComponent, configured: dict[str, Any]
    ) -> PropSet:
        """The prop list for the values configured so far (any subset, not checked as a
        deploy checks them). An ``additionalProps()`` that throws is reported in ``errors``."""
        if not is_dynamic(component):
            return _prop_set(component, component.configurable_props)
        try:
            props = await self._run(owner_id, component, configured)
        except errors.InvalidProps as exc:
            return PropSet(
                _prop_set(component, component.configurable_props).id,
                component.configurable_props,
                [exc.message],
            )
        return _prop_set(component, props)

    async def props_for(
        self, owner_id: str, component: SavedComponent, configured: Any
    ) -> list[dict[str, Any]]:
        """The props ``configured`` is checked against: the component's own, plus what its
        ``additionalProps()`` adds for these values (``InvalidProps`` if it throws)."""
        if not is_dynamic(component) or not isinstance(configured, dict):
            return component.configurable_props
        return await self._run(owner_id, component, configured)

    async def _run(
        self, owner_id: str, component: SavedComponent, configured: dict[str, Any]
    ) -> list[dict[str, Any]]:
        static = [p for p in component.configurable_props if p["type"] not in _NOT_PASSED]
        values = await node_values(self.credentials, owner_id, static, configured, unknown_ok=True)
        values = {k: v for k, v in values.items() if k in configured}
        entry = await self.components.materialize(component)
        result = await self.pool.invoke(
            invocations.of_component(
                self.settings,
                owner_id,
                component,
                entry,
                {"kind": "props", "props": values, "db": {}},
                timeout_s=self.settings.action_timeout_seconds,
            )
        )
        if not result.ok or not isinstance(result.value, dict):
            error = result.error or {}
            if error.get("code") == protocol.LOAD_FAILED:
                raise load_error(result, entry.parent)
            message = scrub_paths(str(error.get("message", "")), entry.parent)
            raise errors.InvalidProps(
                f"additionalProps() failed: {error.get('name', 'Error')}: {message}",
                field="configured_props",
                details={"logs": result.logs},
            )
        return self._checked(component, result.value.get("props") or [])

    def _checked(
        self, component: SavedComponent, reported: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The reported props, each checked as a saved component's are."""
        compat = component.registry or self.settings.compat_rules
        info = {**component.shape, "props": reported}
        try:
            return rules.validate_shape(info, compat=compat).configurable_props
        except errors.InvalidComponent as exc:
            raise errors.InvalidProps(
                f"additionalProps() returned an invalid prop: {exc.message}",
                field="configured_props",
            ) from exc


def _prop_set(component: SavedComponent, props: list[dict[str, Any]]) -> PropSet:
    digest = hashlib.sha256(
        json.dumps([component.id, props], sort_keys=True, default=str).encode()
    ).hexdigest()
    return PropSet(f"dyp_{digest[:24]}", props)
