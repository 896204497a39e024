"""OAuth API clients and the short-lived tokens they are issued (``client_credentials``,
Pipedream's ``POST /v1/oauth/token``; issue 27).

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_oauth_clients_account_id", "oauth_clients", ["account_id"])
    op.create_table(
        "oauth_tokens",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "client_id",
            sa.String(40),
            sa.ForeignKey("oauth_clients.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_oauth_tokens_client_id", "oauth_tokens", ["client_id"])


def downgrade() -> None:
    op.drop_index("ix_oauth_tokens_client_id", table_name="oauth_tokens")
    op.drop_table("oauth_tokens")
    op.drop_index("ix_oauth_clients_account_id", table_name="oauth_clients")
    op.drop_table("oauth_clients")
