"""Stored files: the bodies endpoints keep behind a URL (``x-pd-upload-body: 1``) and the file
parts of ``multipart/form-data`` requests, each until its ``expires_ms``.

A file is read by its id and the sha256 of its URL's secret (``engine/runs/files.py`` makes both);
an expired file is as absent as a deleted one. Expired files are deleted a batch at a time
when their account stores a new one (``delete_expired_sync``); until then the recount of the
storage quota leaves them out (``usage.recount_sync``).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sluice.storage.tables import files

#: Expired files deleted per store (bounded work in the storing transaction).
_SWEEP = 100


@dataclass(frozen=True)
class StoredFile:
    id: str
    owner_id: str
    secret_hash: str
    filename: str | None
    mimetype: str
    size: int
    created_ms: int
    expires_ms: int


def insert_sync(conn: Connection, file: StoredFile, data: bytes) -> None:
    conn.execute(
        files.insert().values(
            id=file.id,
            owner_id=file.owner_id,
            secret_hash=file.secret_hash,
            filename=file.filename,
            mimetype=file.mimetype,
            size=file.size,
            data=data,
            created_ms=file.created_ms,
            expires_ms=file.expires_ms,
        )
    )


def get_sync(conn: Connection, file_id: str, now_ms: int) -> tuple[StoredFile, bytes] | None:
    """The file and its bytes, unless it is absent or expired."""
    row = conn.execute(
        sa.select(files).where(files.c.id == file_id, files.c.expires_ms > now_ms)
    ).first()
    if row is None:
        return None
    meta = StoredFile(
        id=row.id,
        owner_id=row.owner_id,
        secret_hash=row.secret_hash,
        filename=row.filename,
        mimetype=row.mimetype,
        size=int(row.size),
        created_ms=int(row.created_ms),
        expires_ms=int(row.expires_ms),
    )
    return meta, bytes(row.data)


def delete_expired_sync(conn: Connection, owner_id: str, now_ms: int) -> int:
    """Delete up to ``_SWEEP`` of the account's expired files; how many went."""
    doomed = (
        sa.select(files.c.id)
        .where(files.c.owner_id == owner_id, files.c.expires_ms <= now_ms)
        .limit(_SWEEP)
        .scalar_subquery()
    )
    result = conn.execute(sa.delete(files).where(files.c.id.in_(doomed)))
    return int(result.rowcount or 0)


def live_bytes_query(owner_id: str, now_ms: int) -> sa.Select[tuple[int]]:
    """The bytes of the account's files not expired (the storage quota's recount)."""
    return sa.select(sa.func.coalesce(sa.func.sum(files.c.size), 0)).where(
        files.c.owner_id == owner_id, files.c.expires_ms > now_ms
    )
