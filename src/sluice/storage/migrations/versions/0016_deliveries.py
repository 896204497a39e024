"""Deliveries to webhooks (``dlv_…``): retried with backoff for hours, then kept dead until
retried by hand (docs/deploy.md, "Webhook deliveries"). They were ``emit`` jobs, failed for
good after 5 attempts; those still queued or failed are moved here.

Revision ID: 0016
Revises: 0015
"""

import json
import secrets
import string

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _new_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "dlv_" + "".join(secrets.choice(alphabet) for _ in range(12))


def upgrade() -> None:
    deliveries = op.create_table(
        "deliveries",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "webhook_id",
            sa.String(40),
            sa.ForeignKey("webhooks.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("owner_id", sa.String(40), nullable=False),
        sa.Column("payload", JSON),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_ms", sa.BigInteger, nullable=False),
        sa.Column("since_ms", sa.BigInteger, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger),
        sa.Column("last_status", sa.Integer),
        sa.Column("last_error", sa.Text),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["status", "next_ms"])
    op.create_index("ix_deliveries_webhook", "deliveries", ["webhook_id", "status", "created_ms"])
    # The webhook deliveries still in the job queue (queued, or failed after 5 attempts).
    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            "SELECT j.id, j.owner_id, j.target_id, j.payload, j.status, j.attempts,"
            " j.run_after_ms, j.created_ms, j.last_error FROM jobs j"
            " JOIN webhooks w ON w.id = j.target_id"
            " WHERE j.kind = 'emit' AND j.status IN ('queued', 'running', 'failed')"
        )
    ).fetchall()
    moved = []
    for row in rows:
        payload = row.payload
        if isinstance(payload, str):
            payload = json.loads(payload)
        dead = row.status == "failed"
        moved.append(
            {
                "id": _new_id(),
                "webhook_id": row.target_id,
                "owner_id": row.owner_id,
                "payload": payload,
                "status": "dead" if dead else "pending",
                "attempts": row.attempts,
                "claims": row.attempts,
                "next_ms": row.run_after_ms,
                "since_ms": row.created_ms,
                "created_ms": row.created_ms,
                "finished_ms": row.run_after_ms if dead else None,
                "last_error": row.last_error,
            }
        )
    if moved:
        op.bulk_insert(deliveries, moved)
        ids = [row.id for row in rows]
        gone = sa.text("DELETE FROM jobs WHERE id IN :ids")
        bind.execute(gone.bindparams(sa.bindparam("ids", expanding=True)), {"ids": ids})


def downgrade() -> None:
    op.drop_index("ix_deliveries_webhook", "deliveries")
    op.drop_index("ix_deliveries_due", "deliveries")
    op.drop_table("deliveries")
