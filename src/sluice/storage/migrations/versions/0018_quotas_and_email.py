"""Quotas and verified e-mail (issue 25): the per-account storage counter
(``account_usage``) and ``accounts.email_verified``. Addresses stored before are not verified:
any account could set any address, and nothing tells which were its own (each account verifies
once: ``sluice email verify``).

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "account_usage",
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("stored_bytes", sa.BigInteger, nullable=False),
        sa.Column("counted_ms", sa.BigInteger, nullable=False),
    )
    # Not in batch mode: on SQLite that copies the table, and dropping the old one would
    # cascade to every table that references accounts.
    op.add_column(
        "accounts",
        sa.Column("email_verified", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("accounts", "email_verified")  # SQLite 3.35+ drops a column in place
    op.drop_table("account_usage")
