"""HTTP endpoints: which deployment answers an endpoint id. Read on every request to an
endpoint, so the statement is built once and runs on ``database.Reader``."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sluice.storage.tables import deployed_components as t


@dataclass(frozen=True)
class Endpoint:
    endpoint_id: str
    deployment_id: str
    owner_id: str
    component_id: str
    active: bool


_BY_ENDPOINT = sa.select(t.c.id, t.c.owner_id, t.c.component_id, t.c.active).where(
    t.c.endpoint_id == sa.bindparam("endpoint_id")
)


def get(conn: Connection, endpoint_id: str) -> Endpoint | None:
    """The deployment behind ``endpoint_id``, active or not; None when there is none."""
    row = conn.execute(_BY_ENDPOINT, {"endpoint_id": endpoint_id}).first()
    if row is None:
        return None
    return Endpoint(endpoint_id, row.id, row.owner_id, row.component_id, bool(row.active))
