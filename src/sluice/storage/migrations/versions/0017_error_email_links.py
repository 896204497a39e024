"""The default global error workflow's e-mail links to the UI's run page and the workflow's
page (it linked to the API's JSON) and no longer reads "Error: Error: …": every account's
unedited default step gets this version's code (``domain/default_error_workflow.py``).

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from sluice import ids
from sluice.domain import default_error_workflow

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    conn = op.get_bind()
    workflows = sa.table(
        "workflows",
        sa.column("id", sa.String),
        sa.column("steps", JSON),
        sa.column("deployment_id", sa.String),
    )
    for row in conn.execute(sa.select(workflows.c.id, workflows.c.steps)).all():
        steps = list(row.steps or [])
        new = [default_error_workflow.upgraded_step(s) or s for s in steps]
        if new != steps:
            conn.execute(
                workflows.update()
                .where(workflows.c.id == row.id)
                # A new deployment: no warm worker keeps running the old code.
                .values(steps=new, deployment_id=ids.new_id("d"))
            )


def downgrade() -> None:
    pass  # the new code works with the older Sluice too
