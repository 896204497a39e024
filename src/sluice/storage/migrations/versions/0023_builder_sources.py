"""A source the workflow builder deployed for a workflow's "New source" trigger names that
workflow (``deployed_components.builder_workflow_id``): when the workflow's trigger changes
again, or the workflow is deleted, that source goes too unless something else uses it.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployed_components") as batch:
        batch.add_column(sa.Column("builder_workflow_id", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deployed_components") as batch:
        batch.drop_column("builder_workflow_id")
