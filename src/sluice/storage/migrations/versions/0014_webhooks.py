"""Webhooks (``wh_…``): URLs that subscriptions deliver events to, as Pipedream's.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("name", sa.String(200)),
        sa.Column("description", sa.Text),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_webhooks_owner", "webhooks", ["owner_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhooks_owner", "webhooks")
    op.drop_table("webhooks")
