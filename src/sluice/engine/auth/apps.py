"""Connected accounts (``apn_…``): the app credentials that app props read as ``$auth``,
stored encrypted (``storage/apps.py``); what ``/v1/accounts`` creates, lists and deletes."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice.clock import Clock
from sluice.crypto import Cipher
from sluice.domain import apps as app_rules
from sluice.domain.apps import ConnectedAccount
from sluice.engine.auth.app_catalog import AppCatalog
from sluice.storage import apps


class Apps:
    def __init__(self, db: AsyncEngine, cipher: Cipher, clock: Clock, catalog: AppCatalog) -> None:
        self.db = db
        self.cipher = cipher
        self.clock = clock
        self.catalog = catalog

    async def connect(
        self, owner_id: str, app: str, name: str | None, credentials: dict[str, Any]
    ) -> ConnectedAccount:
        """A key app's credentials are checked against its fields (``custom_fields_json``);
        an app outside the catalog takes any credentials, as before the catalog."""
        known = await self.catalog.find(app)
        if known is not None:
            credentials = app_rules.check_credentials(known, credentials)
        async with self.db.begin() as conn:
            return await apps.create(
                conn,
                self.cipher,
                owner_id=owner_id,
                app=app,
                name=name,
                credentials=credentials,
                now_s=self.clock.now_ms() // 1000,
            )

    async def list(self, owner_id: str, app: str | None = None) -> list[ConnectedAccount]:
        """The account's connected accounts, oldest first (``app``'s only when given)."""
        async with self.db.connect() as conn:
            return await apps.list_for(conn, self.cipher, owner_id, app)

    async def get(self, owner_id: str, account_id: str) -> ConnectedAccount | None:
        async with self.db.connect() as conn:
            return await apps.get(conn, self.cipher, owner_id, account_id)

    async def delete(self, owner_id: str, account_id: str) -> bool:
        """Whether there was one to delete."""
        async with self.db.begin() as conn:
            return await apps.delete(conn, owner_id, account_id)
