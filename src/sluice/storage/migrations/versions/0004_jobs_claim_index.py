"""Jobs: the claim's index is (status, id), so a claim stops after the jobs it takes instead
of scanning (and sorting) every job of a status; done jobs are pruned by the worker.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_status_id", "jobs", ["status", "id"])
    op.drop_index("ix_jobs_ready", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_ready", "jobs", ["status", "run_after_ms"])
    op.drop_index("ix_jobs_status_id", table_name="jobs")
