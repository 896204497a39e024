"""Jobs carry a fencing token: ``claim`` counts the claims of the job and only ever grows.

A worker's results commit only while the job's ``claim`` is still the one it took
(``storage/jobs.py``): a worker that stalled past its lease cannot store a run another worker
has taken over.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("claim", sa.Integer, nullable=False, server_default="0"))
    # A running job held before this migration keeps a valid token: its holder has none, so
    # it cannot commit; it runs again after its lease, as a lost worker's job does.


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("claim")
