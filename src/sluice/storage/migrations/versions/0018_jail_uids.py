"""Accounts keep the uid their runners' jails run under (``accounts.jail_uid``, unique): one
uid per account across every process sharing the database (it was picked per process, so two
accounts in two processes could share one).

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
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("jail_uid", sa.BigInteger, nullable=True))
        batch.create_unique_constraint("uq_accounts_jail_uid", ["jail_uid"])


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_constraint("uq_accounts_jail_uid", type_="unique")
        batch.drop_column("jail_uid")
