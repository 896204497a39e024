"""PostgreSQL pushes changes to workflow rows: a trigger NOTIFYs ``sluice_workflows`` at the
commit of any insert, update or delete of ``workflows`` (once per transaction: the payload is
always empty), so each process keeps the workflows its runs read until one changes
(``engine/notifications.PushedChanges``). Nothing on SQLite (a shared counter file there).

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

#: One statement each: asyncpg prepares every statement, one command at a time.
_STATEMENTS = (
    """CREATE OR REPLACE FUNCTION sluice_notify_workflows() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('sluice_workflows', '');
      RETURN NULL;
    END $$""",
    """CREATE TRIGGER sluice_workflows_changed AFTER INSERT OR UPDATE OR DELETE ON workflows
    FOR EACH STATEMENT EXECUTE FUNCTION sluice_notify_workflows()""",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS sluice_workflows_changed ON workflows")
    op.execute("DROP FUNCTION IF EXISTS sluice_notify_workflows()")
