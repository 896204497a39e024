"""A timer says what it ticks for (``timers.kind``: "source" or "workflow"), and a ``timer``
job carries it (``domain.jobs.TimerJob``): the handler no longer tells a workflow from a source
by its id. Existing timers get it from their target's id (``p_`` is a workflow).

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("timers") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=True))
    op.execute(
        "UPDATE timers SET kind = CASE WHEN deployment_id LIKE 'p\\_%' ESCAPE '\\' "
        "THEN 'workflow' ELSE 'source' END"
    )
    with op.batch_alter_table("timers") as batch:
        batch.alter_column("kind", existing_type=sa.String(16), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("timers") as batch:
        batch.drop_column("kind")
