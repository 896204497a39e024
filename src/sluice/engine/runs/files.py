"""Files endpoints keep behind URLs, as Pipedream does: a request body sent with
``x-pd-upload-body: 1`` (or ``?pipedream_upload_body=1``), which the event gets as
``body.raw_body_url``, and each file part of a ``multipart/form-data`` request, which the
event gets as ``{url, filename, mimetype}``.

A file is stored in the database (so every process sharing it serves it), counted against the
account's storage quota (507 ``storage_quota_exceeded`` when it is full), and served at
``<public url>/files/<id>/<secret>`` (``api/files.py``) with no API key: the 32-character
random secret is the credential, as Pipedream's signed URLs are, so a run, a browser or a
third party handed the URL can fetch it. Only the secret's sha256 is stored. A file lives
``SLUICE_HTTP_FILE_TTL_SECONDS`` (Pipedream: 30 minutes), then its URL answers 404 and the
file is deleted when its account next stores one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.engine.state.commit import Commit
from sluice.storage import files as store
from sluice.storage.files import StoredFile

#: Random characters of a file URL's secret (base62: ~190 bits).
SECRET_LENGTH = 32
#: The type of a stored body whose request named none.
OCTET_STREAM = "application/octet-stream"


@dataclass(frozen=True)
class NewFile:
    """What to store: the bytes, and what the event and the download say of them."""

    data: bytes
    mimetype: str
    filename: str | None = None


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Files:
    def __init__(self, db: AsyncEngine, commit: Commit, ttl_seconds: int, clock: Clock) -> None:
        self.db = db
        #: Stored on the one writer, the quota charged in the same transaction.
        self.commit = commit
        self.ttl_ms = max(1, ttl_seconds) * 1000
        self.clock = clock

    async def store(self, owner_id: str, new: Sequence[NewFile], base_url: str) -> list[str]:
        """Store the files in one transaction; their URLs under ``base_url``, in order.
        ``StorageQuotaExceeded`` when the account is at its quota."""
        if not new:
            return []
        now = self.clock.now_ms()
        quota = self.commit.quota
        made = [(ids.new_id("fl"), ids.random_token(SECRET_LENGTH), f) for f in new]

        def transaction(conn: Connection) -> None:
            store.delete_expired_sync(conn, owner_id, now)
            if quota.enabled and quota.over_sync(conn, owner_id, now):
                raise quota.error()
            for file_id, secret, f in made:
                meta = StoredFile(
                    id=file_id,
                    owner_id=owner_id,
                    secret_hash=_hash(secret),
                    filename=f.filename,
                    mimetype=f.mimetype[:200] or OCTET_STREAM,
                    size=len(f.data),
                    created_ms=now,
                    expires_ms=now + self.ttl_ms,
                )
                store.insert_sync(conn, meta, f.data)
            quota.charge_sync(conn, owner_id, sum(len(f.data) for f in new), now)

        await self.commit.write(transaction)
        base = base_url.rstrip("/")
        return [f"{base}/files/{file_id}/{secret}" for file_id, secret, _ in made]

    async def read(self, file_id: str, secret: str) -> tuple[StoredFile, bytes]:
        """The file behind a URL; ``NotFound`` for an unknown, expired or wrong-secret one (the
        same answer for each: a wrong secret tells nothing)."""
        now = self.clock.now_ms()
        async with self.db.connect() as conn:
            found = await conn.run_sync(lambda c: store.get_sync(c, file_id, now))
        if found is None or not hmac.compare_digest(_hash(secret), found[0].secret_hash):
            raise errors.NotFound("no such file, or its URL has expired")
        return found
