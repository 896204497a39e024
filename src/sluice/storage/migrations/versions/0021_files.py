"""Stored request bodies and uploaded files (``files``): a body sent with ``x-pd-upload-body: 1``
and the file parts of ``multipart/form-data`` requests, served at secret URLs until they
expire (issue 27).

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("filename", sa.Text),
        sa.Column("mimetype", sa.String(200), nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_files_owner_expires", "files", ["owner_id", "expires_ms"])


def downgrade() -> None:
    op.drop_index("ix_files_owner_expires", table_name="files")
    op.drop_table("files")
