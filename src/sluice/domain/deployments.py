"""A deployed component: a source, or a workflow's trigger and steps' deployment (stored in
``storage/sources.py``). Plain values."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Deployment:
    id: str
    owner_id: str
    component_id: str
    name: str
    name_slug: str
    configured_props: dict[str, Any]
    secret_props: dict[str, str]
    active: bool
    endpoint_id: str | None
    dedupe_state: dict[str, Any] | None
    created_at: int
    updated_at: int
    #: The workflow whose builder deployed it as that workflow's trigger, if one did.
    builder_workflow_id: str | None = None

    def with_changes(self, **changes: Any) -> Deployment:
        return replace(self, **changes)
