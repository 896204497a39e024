"""A workflow's run, as stored in ``storage/runs.py`` and read by the API. Plain values;
its status and steps are decided in ``domain/outcomes.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    id: str
    owner_id: str
    workflow_id: str
    deployment_id: str
    status: str
    event: Any
    context: dict[str, Any]
    steps: list[dict[str, Any]]
    error: dict[str, Any] | None
    flow_exit: dict[str, Any] | None
    response: dict[str, Any] | None
    started_ms: int
    duration_ms: float
    replay_of: str | None = None
    sends: list[dict[str, Any]] = field(default_factory=list)
    #: While paused by a step's ``$.flow``: its wait (``domain.flow.Pause`` as JSON).
    pause: dict[str, Any] | None = None
