"""The builder's last test result of each step of a workflow (``step_tests``), shown again
when the builder is opened (docs/ui.md).

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "step_tests",
        sa.Column(
            "workflow_id",
            sa.String(40),
            sa.ForeignKey("workflows.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("step_name", sa.String(200), primary_key=True),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("result", JSON, nullable=False),
        sa.Column("tested_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("step_tests")
