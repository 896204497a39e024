"""The builder's kept test results: the last one of each step of a workflow (``step_tests``),
replaced by the next test of that step."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sluice.storage.tables import step_tests as t


def put_sync(
    conn: Connection,
    owner_id: str,
    workflow_id: str,
    step_name: str,
    result: dict[str, Any],
    now_ms: int,
) -> None:
    conn.execute(t.delete().where(t.c.workflow_id == workflow_id, t.c.step_name == step_name))
    conn.execute(
        t.insert().values(
            workflow_id=workflow_id,
            step_name=step_name,
            owner_id=owner_id,
            result=result,
            tested_ms=now_ms,
        )
    )


def of_workflow_sync(
    conn: Connection, owner_id: str, workflow_id: str
) -> dict[str, tuple[dict[str, Any], int]]:
    """Step name → (result, tested_ms): only the owner's."""
    rows = conn.execute(
        sa.select(t.c.step_name, t.c.result, t.c.tested_ms).where(
            t.c.workflow_id == workflow_id, t.c.owner_id == owner_id
        )
    )
    return {row.step_name: (dict(row.result), row.tested_ms) for row in rows}
