"""Alembic environment: Sluice runs migrations itself at start (``storage.database.migrate``),
handing Alembic an open connection in ``config.attributes["connection"]``."""

from alembic import context

from sluice.storage.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Sluice's migrations run through `sluice serve` or `sluice db upgrade`")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
