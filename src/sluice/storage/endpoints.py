"""HTTP endpoints: which deployment answers an endpoint id. Read on every request to an
endpoint, so the statement is built once and runs on ``database.Reader``."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from sluice.storage.tables import deployed_components as t
from sluice.storage.tables import workflows as wt


@dataclass(frozen=True)
class Endpoint:
    endpoint_id: str
    deployment_id: str
    owner_id: str
    component_id: str
    active: bool
    #: A workflow's endpoint (``deployment_id`` is then the workflow's ``p_`` id).
    workflow: bool = False


_BY_ENDPOINT = sa.select(t.c.id, t.c.owner_id, t.c.component_id, t.c.active).where(
    t.c.endpoint_id == sa.bindparam("endpoint_id")
)


#: The same on SQLite's own cursor: ~3 µs instead of ~20 through SQLAlchemy, on every request.
_BY_ENDPOINT_SQLITE = str(_BY_ENDPOINT.compile(dialect=sqlite.dialect()))


_WORKFLOW_BY_ENDPOINT = sa.select(wt.c.id, wt.c.owner_id, wt.c.active).where(
    wt.c.endpoint_id == sa.bindparam("endpoint_id")
)


def get(conn: Connection, endpoint_id: str) -> Endpoint | None:
    """The source or workflow behind ``endpoint_id``, active or not; None when there is none."""
    dbapi = conn.connection.dbapi_connection
    if conn.dialect.name == "sqlite" and dbapi is not None:
        cursor = dbapi.cursor()
        try:
            cursor.execute(_BY_ENDPOINT_SQLITE, (endpoint_id,))
            row = cursor.fetchone()
        finally:
            cursor.close()
    else:
        row = conn.execute(_BY_ENDPOINT, {"endpoint_id": endpoint_id}).first()
    if row is None:
        found = conn.execute(_WORKFLOW_BY_ENDPOINT, {"endpoint_id": endpoint_id}).first()
        if found is None:
            return None
        return Endpoint(endpoint_id, found.id, found.owner_id, "", bool(found.active), True)
    deployment_id, owner_id, component_id, active = row
    return Endpoint(endpoint_id, deployment_id, owner_id, component_id, bool(active))
