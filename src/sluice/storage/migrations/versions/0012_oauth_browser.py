"""OAuth connections: the browser a connection was opened in (``browser_hash``, the sha256 of
its ``sluice_oauth`` cookie), so that only that browser's callback finishes it.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("oauth_states") as batch:
        batch.add_column(sa.Column("browser_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oauth_states") as batch:
        batch.drop_column("browser_hash")
