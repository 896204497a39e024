"""A workflow: its trigger and steps (stored in ``storage/workflows.py``). Plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Workflow:
    id: str
    owner_id: str
    name: str
    active: bool
    trigger: dict[str, Any]
    steps: list[dict[str, Any]]
    deployment_id: str
    endpoint_id: str | None
    created_at: int
    updated_at: int
    #: Its errors go to the account's global error workflow.
    global_errors: bool = True

    @property
    def trigger_type(self) -> str:
        return str(self.trigger.get("type"))
