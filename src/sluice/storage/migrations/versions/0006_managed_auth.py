"""Managed auth: the app catalog (``apps``), OAuth connections under way (``oauth_states``),
and on connected accounts the provider's user id, the token's expiry, the reconnect reason and
the refresh lease.

Revision ID: 0006
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("connected_accounts") as batch:
        batch.add_column(sa.Column("provider_uid", sa.String(300)))
        batch.add_column(sa.Column("expires_at_ms", sa.BigInteger))
        batch.add_column(sa.Column("reconnect_reason", sa.Text))
        batch.add_column(sa.Column("refresh_lease_ms", sa.BigInteger))
        batch.add_column(sa.Column("refresh_holder", sa.String(40)))
    op.create_index(
        "ix_connected_accounts_identity",
        "connected_accounts",
        ["owner_id", "app", "provider_uid"],
    )
    op.create_table(
        "apps",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name_slug", sa.String(100), nullable=False, unique=True),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("client_secret", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "oauth_states",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("app", sa.String(100), nullable=False),
        sa.Column("name", sa.String(200)),
        sa.Column("verifier", sa.Text),
        sa.Column("return_to", sa.String(1000)),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_oauth_states_expires_at_ms", "oauth_states", ["expires_at_ms"])


def downgrade() -> None:
    op.drop_index("ix_oauth_states_expires_at_ms", table_name="oauth_states")
    op.drop_table("oauth_states")
    op.drop_table("apps")
    op.drop_index("ix_connected_accounts_identity", table_name="connected_accounts")
    with op.batch_alter_table("connected_accounts") as batch:
        batch.drop_column("refresh_holder")
        batch.drop_column("refresh_lease_ms")
        batch.drop_column("reconnect_reason")
        batch.drop_column("expires_at_ms")
        batch.drop_column("provider_uid")
