"""Accounts, keys, connected accounts, components, deployments, state, events, logs.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGPK = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("username", sa.String(200), nullable=False),
        sa.Column("email", sa.String(320)),
        sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_used_at", sa.BigInteger),
        sa.Column("revoked_at", sa.BigInteger),
    )
    op.create_index("ix_api_keys_account_id", "api_keys", ["account_id"])
    op.create_table(
        "connected_accounts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("app", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200)),
        sa.Column("credentials", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_connected_accounts_owner_id", "connected_accounts", ["owner_id"])
    op.create_table(
        "saved_components",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(300)),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("version", sa.String(100), nullable=False),
        sa.Column("component_type", sa.String(20), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("entry_path", sa.String(500), nullable=False),
        sa.Column("files", JSON, nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("dependencies", JSON, nullable=False),
        sa.Column("component_url", sa.Text),
        sa.Column("shape", JSON, nullable=False),
        sa.Column("configurable_props", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_saved_components_owner_key", "saved_components", ["owner_id", "key"])
    op.create_table(
        "deployed_components",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "owner_id",
            sa.String(40),
            sa.ForeignKey("accounts.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "component_id", sa.String(40), sa.ForeignKey("saved_components.id"), nullable=False
        ),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("name_slug", sa.String(300), nullable=False),
        sa.Column("configured_props", JSON, nullable=False),
        sa.Column("secret_props", JSON, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("endpoint_id", sa.String(40), unique=True),
        sa.Column("dedupe_state", JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("owner_id", "name_slug", name="uq_deployed_components_owner_slug"),
    )
    op.create_table(
        "component_state",
        sa.Column(
            "deployment_id",
            sa.String(40),
            sa.ForeignKey("deployed_components.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("value", JSON),
    )
    op.create_table(
        "events",
        sa.Column("pk", BIGPK, primary_key=True, autoincrement=True),
        sa.Column("emitter_id", sa.String(40), nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("ts_ms", sa.BigInteger, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("channel", sa.String(300), nullable=False, server_default=""),
        sa.Column("emit_id", sa.String(40), nullable=False),
        sa.Column("payload", JSON),
        sa.Column("meta", JSON, nullable=False),
        sa.UniqueConstraint("emitter_id", "ts_ms", "seq", name="uq_events_emitter_position"),
    )
    op.create_index(
        "ix_events_emitter_channel", "events", ["emitter_id", "channel", "ts_ms", "seq"]
    )
    op.create_table(
        "logs",
        sa.Column("pk", BIGPK, primary_key=True, autoincrement=True),
        sa.Column("emitter_id", sa.String(40), nullable=False),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("ts_ms", sa.BigInteger, nullable=False),
        sa.Column("level", sa.String(20), nullable=False),
        sa.Column("msg", sa.Text, nullable=False),
        sa.Column("invocation_id", sa.String(40)),
    )
    op.create_index("ix_logs_emitter", "logs", ["emitter_id", "pk"])


def downgrade() -> None:
    for table in (
        "logs",
        "events",
        "component_state",
        "deployed_components",
        "saved_components",
        "connected_accounts",
        "api_keys",
        "accounts",
    ):
        op.drop_table(table)
