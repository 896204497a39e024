"""The global error workflow each account starts with (``accounts.error_workflow_id``): one
code step that e-mails a summary of each error (``domain/error_workflow.py``).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain import error_workflow
from sluice.domain.workflows import Workflow
from sluice.storage import workflows as store


def default_error_workflow(owner_id: str, *, base_url: str, now_s: int) -> Workflow:
    """The global error workflow an account starts with (stored without running Node: its
    code step is laid out on disk at its first run)."""
    return Workflow(**error_workflow.fields(owner_id, base_url=base_url, now_s=now_s))


async def create_default_error_workflow(
    conn: AsyncConnection, owner_id: str, *, base_url: str, now_s: int
) -> Workflow:
    workflow = default_error_workflow(owner_id, base_url=base_url, now_s=now_s)
    await store.insert(conn, workflow)
    await store.set_error_workflow_id(conn, owner_id, workflow.id)
    return workflow
