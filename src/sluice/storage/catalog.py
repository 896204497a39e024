"""Apps an operator registered or edited (``apps``): the stored half of the app catalog.

A stored app of a built-in's slug replaces the built-in. The OAuth client secret is encrypted
with AES-GCM bound to the slug and only decrypted for a token request.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice import ids
from sluice.crypto import Cipher
from sluice.domain.apps import App, Field, OAuthConfig
from sluice.storage.tables import apps as t


def _aad(slug: str) -> str:
    return f"apps:{slug}:client_secret"


def _spec(app: App) -> dict[str, Any]:
    return {
        "name": app.name,
        "auth_type": app.auth_type,
        "description": app.description,
        "categories": list(app.categories),
        "img_src": app.img_src,
        "fields": [f.__dict__ for f in app.fields],
        "oauth": None
        if app.oauth is None
        else {**app.oauth.__dict__, "scopes": list(app.oauth.scopes)},
        "imported_from": app.imported_from,
        "managed_auth": app.managed_auth,
    }


def _app(row: Any) -> App:
    spec = row.spec
    oauth = spec.get("oauth")
    return App(
        name_slug=row.name_slug,
        name=spec["name"],
        auth_type=spec["auth_type"],
        id=row.id,
        description=spec.get("description"),
        categories=tuple(spec.get("categories") or ()),
        img_src=spec.get("img_src"),
        fields=tuple(Field(**f) for f in spec.get("fields") or ()),
        oauth=None if oauth is None else OAuthConfig(**{**oauth, "scopes": tuple(oauth["scopes"])}),
        has_client_secret=row.client_secret is not None,
        imported_from=spec.get("imported_from"),
        managed_auth=spec.get("managed_auth", True),
    )


async def list_all(conn: AsyncConnection) -> list[App]:
    rows = (await conn.execute(sa.select(t).order_by(t.c.name_slug))).all()
    return [_app(r) for r in rows]


async def get(conn: AsyncConnection, slug: str) -> App | None:
    row = (await conn.execute(sa.select(t).where(t.c.name_slug == slug))).first()
    return _app(row) if row else None


async def client_secret(conn: AsyncConnection, cipher: Cipher, slug: str) -> str | None:
    row = (await conn.execute(sa.select(t.c.client_secret).where(t.c.name_slug == slug))).first()
    if row is None or row.client_secret is None:
        return None
    return cipher.decrypt(row.client_secret, _aad(slug))


async def put(
    conn: AsyncConnection,
    cipher: Cipher,
    app: App,
    *,
    secret: str | None,
    keep_id: str | None,
    now_s: int,
) -> App:
    """Store ``app`` (insert, or replace the stored one); ``secret`` None keeps the stored
    client secret, ``""`` removes it. A built-in stored for the first time keeps its id."""
    current = (await conn.execute(sa.select(t).where(t.c.name_slug == app.name_slug))).first()
    values: dict[str, Any] = {"spec": _spec(app), "updated_at": now_s}
    if secret is not None:
        values["client_secret"] = cipher.encrypt(secret, _aad(app.name_slug)) if secret else None
    if current is None:
        app_id = keep_id or ids.new_id("app", 6)
        await conn.execute(
            t.insert().values(id=app_id, name_slug=app.name_slug, created_at=now_s, **values)
        )
    else:
        await conn.execute(t.update().where(t.c.name_slug == app.name_slug).values(**values))
    found = await get(conn, app.name_slug)
    assert found is not None
    return found
