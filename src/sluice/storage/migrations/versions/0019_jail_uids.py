"""Accounts keep the uid their runners' jails run under (``accounts.jail_uid``, unique): one
uid per account across every process sharing the database (it was picked per process, so two
accounts in two processes could share one).

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Not batch mode: SQLite would copy and drop ``accounts``, and the drop cascades.
    op.add_column("accounts", sa.Column("jail_uid", sa.BigInteger, nullable=True))
    op.create_index("ix_accounts_jail_uid", "accounts", ["jail_uid"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_accounts_jail_uid", table_name="accounts")
    op.drop_column("accounts", "jail_uid")
