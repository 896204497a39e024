"""Browser logins (issue 12): an account's password hash, API key names, browser sessions.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("password_hash", sa.String(200)))
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("name", sa.String(200)))
    op.create_table(
        "browser_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_browser_sessions_account_id", "browser_sessions", ["account_id"])


def downgrade() -> None:
    op.drop_index("ix_browser_sessions_account_id", table_name="browser_sessions")
    op.drop_table("browser_sessions")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("name")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("password_hash")
