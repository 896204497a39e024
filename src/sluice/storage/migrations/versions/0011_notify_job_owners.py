"""PostgreSQL: a ``sluice_jobs`` notification names the accounts whose jobs were added or queued
again (space-separated; empty when they would not fit a notification), and says ``~`` when one
of them is due later than it was made (a retry's backoff, a pause). So a worker whose claim
skips an account at its share does not walk that account's queue again for each of its new
jobs (under one account's burst every flush's notification made every worker repeat that
walk: ~40 walks of ~16,000 index entries a second at 10,000 requests a second), and its due
timer looks at the queue only when a job may be due later.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_UP = (
    """CREATE OR REPLACE FUNCTION sluice_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify(
        'sluice_jobs',
        NEW.owner_id || CASE WHEN NEW.run_after_ms > NEW.created_ms THEN ' ~' ELSE '' END
      );
      RETURN NULL;
    END $$""",
    """CREATE OR REPLACE FUNCTION sluice_notify_jobs_added() RETURNS trigger LANGUAGE plpgsql
    AS $$
    DECLARE owners text; later boolean;
    BEGIN
      SELECT string_agg(DISTINCT owner_id, ' '), bool_or(run_after_ms > created_ms)
        INTO owners, later FROM added;
      -- A notification's payload holds under 8,000 bytes: past that, "some account".
      IF length(owners) >= 7000 THEN
        owners := '';
      END IF;
      PERFORM pg_notify('sluice_jobs', owners || CASE WHEN later THEN ' ~' ELSE '' END);
      RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS sluice_jobs_added ON jobs",
    """CREATE TRIGGER sluice_jobs_added AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_jobs_added()""",
)

_DOWN = (
    "DROP TRIGGER IF EXISTS sluice_jobs_added ON jobs",
    "DROP FUNCTION IF EXISTS sluice_notify_jobs_added()",
    """CREATE OR REPLACE FUNCTION sluice_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('sluice_jobs', '');
      RETURN NULL;
    END $$""",
    """CREATE TRIGGER sluice_jobs_added AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_jobs()""",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _UP:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _DOWN:
        op.execute(statement)
