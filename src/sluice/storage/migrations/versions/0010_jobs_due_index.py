"""Jobs: a partial index of the deferred queued jobs (due later than they were made: a retry's
backoff, a ``$.flow`` pause), for the due timer's question "when does the next queued job
become due?" (``storage.jobs.next_due_sync``). Without it the answer walked every queued job:
on PostgreSQL each job insert's notification asks it, so under a burst its cost grew with the
queue (~20,000 index entries a look, ~80 looks a second at 10,000 requests a second). A plain
(status, run_after_ms) index would be taken by the claim too, which then sorts every ready job
(migration 0004); the claim's conditions do not imply this index's, so it never is. Jobs due at
once (every request's) are not in it.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_DEFERRED = "status = 'queued' AND run_after_ms > created_ms"


def upgrade() -> None:
    op.create_index(
        "ix_jobs_deferred",
        "jobs",
        ["run_after_ms"],
        postgresql_where=sa.text(_DEFERRED),
        sqlite_where=sa.text(_DEFERRED),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_deferred", table_name="jobs")
