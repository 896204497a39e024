"""PostgreSQL pushes commits to every process: triggers NOTIFY ``sluice_jobs`` when jobs are
added or queued again (released, retried; not on claims or done marks, which would wake every
worker for nothing), and ``sluice_events`` (payload: the emitter's id) when events
or log lines are stored. Notifications are sent at commit, once per distinct payload per
transaction. Nothing on SQLite (one process, or polling).

Revision ID: 0009
Revises: 0007
"""

from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None

#: One statement each: asyncpg prepares every statement, one command at a time.
_STATEMENTS = (
    """CREATE OR REPLACE FUNCTION sluice_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('sluice_jobs', '');
      RETURN NULL;
    END $$""",
    """CREATE OR REPLACE FUNCTION sluice_notify_emitters() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE emitter text;
    BEGIN
      FOR emitter IN SELECT DISTINCT emitter_id FROM stored LOOP
        PERFORM pg_notify('sluice_events', emitter);
      END LOOP;
      RETURN NULL;
    END $$""",
    """CREATE TRIGGER sluice_jobs_added AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_jobs()""",
    """CREATE TRIGGER sluice_jobs_queued AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'queued' AND OLD.status <> 'queued')
    EXECUTE FUNCTION sluice_notify_jobs()""",
    """CREATE TRIGGER sluice_events_stored AFTER INSERT ON events
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_emitters()""",
    """CREATE TRIGGER sluice_logs_stored AFTER INSERT ON logs
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_emitters()""",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for trigger, table in (
        ("sluice_jobs_added", "jobs"),
        ("sluice_jobs_queued", "jobs"),
        ("sluice_events_stored", "events"),
        ("sluice_logs_stored", "logs"),
    ):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS sluice_notify_jobs()")
    op.execute("DROP FUNCTION IF EXISTS sluice_notify_emitters()")
