"""Workflows, runs, sends, mail throttle, auto-subscriptions, code steps' db; the account's
error workflow;
timers without a foreign key (they trigger sources or workflows).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGPK = sa.BigInteger().with_variant(sa.Integer, "sqlite")

_TIMER_COLUMNS = (
    "deployment_id, owner_id, interval_seconds, cron, timezone, next_run_ms, last_run_ms"
)


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("error_workflow_id", sa.String(40)))

    # Rebuilt rather than altered: SQLite cannot drop a foreign key in place. Rows are kept,
    # so no timer loses its phase.
    op.create_table(
        "timers_new",
        sa.Column("deployment_id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("interval_seconds", sa.Integer),
        sa.Column("cron", sa.String(200)),
        sa.Column("timezone", sa.String(80)),
        sa.Column("next_run_ms", sa.BigInteger, nullable=False),
        sa.Column("last_run_ms", sa.BigInteger),
    )
    columns = _TIMER_COLUMNS  # constants only
    op.execute(f"INSERT INTO timers_new ({columns}) SELECT {columns} FROM timers")  # noqa: S608
    op.drop_index("ix_timers_due", table_name="timers")
    op.drop_table("timers")
    op.rename_table("timers_new", "timers")
    op.create_index("ix_timers_due", "timers", ["next_run_ms"])

    op.create_table(
        "workflows",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("trigger", JSON, nullable=False),
        sa.Column("steps", JSON, nullable=False),
        sa.Column("deployment_id", sa.String(40), nullable=False),
        sa.Column("endpoint_id", sa.String(40), unique=True),
        sa.Column("global_errors", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_workflows_owner", "workflows", ["owner_id", "created_at"])

    op.create_table(
        "runs",
        sa.Column("pk", BIGPK, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(40), nullable=False, unique=True),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("workflow_id", sa.String(40), nullable=False),
        sa.Column("deployment_id", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("event", JSON),
        sa.Column("context", JSON, nullable=False),
        sa.Column("steps", JSON, nullable=False),
        sa.Column("error", JSON),
        sa.Column("flow_exit", JSON),
        sa.Column("response", JSON),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("replay_of", sa.String(40)),
    )
    op.create_index("ix_runs_workflow", "runs", ["workflow_id", "pk"])

    op.create_table(
        "run_sends",
        sa.Column("run_id", sa.String(40), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("workflow_id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("step_id", sa.String(40)),
        sa.Column("config", JSON),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("outcome", JSON),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
    )

    op.create_table(
        "mail_throttle",
        sa.Column("owner_id", sa.String(40), primary_key=True),
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("sent_ms", sa.BigInteger, nullable=False),
    )

    op.create_table(
        "auto_subscriptions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("listener_id", sa.String(40), nullable=False),
        sa.Column("event_name", sa.String(300), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("owner_id", "listener_id", "event_name", name="uq_auto_subscriptions"),
    )

    op.create_table(
        "step_state",
        sa.Column("step_id", sa.String(40), primary_key=True),
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("workflow_id", sa.String(40), nullable=False),
        sa.Column("value", JSON),
    )
    op.create_index("ix_step_state_workflow_id", "step_state", ["workflow_id"])

    _error_workflows_for_existing_accounts()


def _error_workflows_for_existing_accounts() -> None:
    """Accounts created before workflows get their global error workflow now, as new ones do
    at creation. Its links use ``SLUICE_PUBLIC_URL`` when set (the migration has no Settings)."""
    import os
    import time

    from sluice.domain import default_error_workflow

    base_url = (os.environ.get("SLUICE_PUBLIC_URL") or "http://127.0.0.1:8000").rstrip("/")
    conn = op.get_bind()
    accounts = sa.table("accounts", sa.column("id"), sa.column("error_workflow_id"))
    workflows = sa.table(
        "workflows",
        sa.column("id", sa.String),
        sa.column("owner_id", sa.String),
        sa.column("name", sa.String),
        sa.column("active", sa.Boolean),
        sa.column("trigger", JSON),
        sa.column("steps", JSON),
        sa.column("deployment_id", sa.String),
        sa.column("endpoint_id", sa.String),
        sa.column("created_at", sa.BigInteger),
        sa.column("updated_at", sa.BigInteger),
    )
    now_s = int(time.time())
    for (account_id,) in conn.execute(sa.select(accounts.c.id)).all():
        w = default_error_workflow.fields(account_id, base_url=base_url, now_s=now_s)
        conn.execute(workflows.insert().values(**w))
        conn.execute(
            accounts.update().where(accounts.c.id == account_id).values(error_workflow_id=w["id"])
        )


def downgrade() -> None:
    for table in (
        "step_state",
        "auto_subscriptions",
        "mail_throttle",
        "run_sends",
        "runs",
        "workflows",
    ):
        op.drop_table(table)
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("error_workflow_id")
