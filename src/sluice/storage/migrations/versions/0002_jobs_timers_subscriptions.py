"""Durable jobs, timers, subscriptions; registry flag on saved components.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGPK = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("saved_components") as batch:
        batch.add_column(
            sa.Column("registry", sa.Boolean, nullable=False, server_default=sa.false())
        )
    op.create_index("ix_saved_components_registry_key", "saved_components", ["registry", "key"])
    op.create_index(
        "uq_saved_components_registry_version",
        "saved_components",
        ["key", "version"],
        unique=True,
        sqlite_where=sa.text("registry"),
        postgresql_where=sa.text("registry"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", BIGPK, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("target_id", sa.String(40), nullable=False),
        sa.Column("payload", JSON),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("run_after_ms", sa.BigInteger, nullable=False),
        sa.Column("locked_until_ms", sa.BigInteger),
        sa.Column("worker_id", sa.String(60)),
        sa.Column("last_error", sa.Text),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger),
    )
    op.create_index("ix_jobs_ready", "jobs", ["status", "run_after_ms"])
    op.create_index("ix_jobs_target", "jobs", ["target_id"])
    op.create_table(
        "timers",
        sa.Column(
            "deployment_id",
            sa.String(40),
            sa.ForeignKey("deployed_components.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("interval_seconds", sa.Integer),
        sa.Column("cron", sa.String(200)),
        sa.Column("timezone", sa.String(80)),
        sa.Column("next_run_ms", sa.BigInteger, nullable=False),
        sa.Column("last_run_ms", sa.BigInteger),
    )
    op.create_index("ix_timers_due", "timers", ["next_run_ms"])
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("emitter_id", sa.String(40), nullable=False),
        sa.Column("listener_id", sa.String(40), nullable=False),
        sa.Column("event_name", sa.String(300), nullable=False, server_default=""),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint(
            "owner_id", "emitter_id", "listener_id", "event_name", name="uq_subscriptions_link"
        ),
    )
    op.create_index(
        "ix_subscriptions_emitter", "subscriptions", ["owner_id", "emitter_id", "event_name"]
    )


def downgrade() -> None:
    op.drop_table("subscriptions")
    op.drop_table("timers")
    op.drop_table("jobs")
    op.drop_index("uq_saved_components_registry_version", "saved_components")
    op.drop_index("ix_saved_components_registry_key", "saved_components")
    with op.batch_alter_table("saved_components") as batch:
        batch.drop_column("registry")
