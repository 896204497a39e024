"""PostgreSQL: a claim is one statement, ``sluice_claim_jobs(...)``, sent outside any explicit
transaction (``storage/jobs.claim_asyncpg``). It was four round trips: BEGIN, ``SET LOCAL
enable_sort = off``, the ``UPDATE … RETURNING``, COMMIT. The planner setting now comes with
the function (its ``SET`` clause holds while the function runs, its statement planned then):
never "read every queued job, then sort" when the statistics are older than a burst
(``tests/integration/test_job_plans.py``). The pick is SQLite's (``storage/jobs._take_statement``).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_UP = """
CREATE OR REPLACE FUNCTION sluice_claim_jobs(
  b_expired boolean, b_now bigint, b_limit integer, b_until bigint, b_worker text,
  b_kinds text[], b_skip text[]
) RETURNS SETOF jobs LANGUAGE sql VOLATILE SET enable_sort = off AS $$
  UPDATE jobs SET status = 'running', locked_until_ms = b_until, worker_id = b_worker,
    attempts = attempts + 1, claim = claim + 1
  WHERE id IN (
    SELECT id FROM jobs
    WHERE status = CASE WHEN b_expired THEN 'running' ELSE 'queued' END
      AND CASE WHEN b_expired THEN locked_until_ms < b_now ELSE run_after_ms <= b_now END
      AND (b_kinds IS NULL OR kind = ANY (b_kinds))
      AND NOT (owner_id = ANY (b_skip))
    ORDER BY id LIMIT b_limit FOR UPDATE SKIP LOCKED)
  RETURNING *
$$
"""

_DOWN = (
    "DROP FUNCTION IF EXISTS sluice_claim_jobs(boolean, bigint, integer, bigint, text, text[], "
    "text[])"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_UP)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DOWN)
