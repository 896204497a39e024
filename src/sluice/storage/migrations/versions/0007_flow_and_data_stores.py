"""``$.flow`` pauses (``runs.pause``) and account data stores (``data_stores``,
``data_store_records``).

Revision ID: 0007
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("runs", sa.Column("pause", JSON, nullable=True))
    op.create_table(
        "data_stores",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("owner_id", "name", name="uq_data_stores_name"),
    )
    op.create_table(
        "data_store_records",
        sa.Column(
            "store_id",
            sa.String(40),
            sa.ForeignKey("data_stores.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("value", JSON),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("expires_ms", sa.BigInteger),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("data_store_records")
    op.drop_table("data_stores")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("pause")
