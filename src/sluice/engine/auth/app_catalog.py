"""The app catalog (``/v1/apps``): the built-in apps (``domain/apps.py``) with what operators
registered or edited over them (``storage/catalog.py``), and the apps of imported
``@pipedream/*`` packages (``add_imported``), which never replace either."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.clock import Clock
from sluice.crypto import Cipher
from sluice.domain import app_files
from sluice.domain import apps as rules
from sluice.domain.app_files import AppFile
from sluice.domain.apps import App, Field
from sluice.storage import catalog

#: What an import did with its package's app.
Taken = Literal["added", "updated", "kept"]


class AppCatalog:
    def __init__(self, db: AsyncEngine, cipher: Cipher, clock: Clock) -> None:
        self.db = db
        self.cipher = cipher
        self.clock = clock

    async def list(self, query: str | None = None) -> list[App]:
        """Every app whose slug, name or description holds the words of ``query``, by slug."""
        async with self.db.connect() as conn:
            stored = {a.name_slug: a for a in await catalog.list_all(conn)}
        merged = {**rules.BUILTIN_BY_SLUG, **stored}
        return [merged[slug] for slug in sorted(merged) if rules.matches(merged[slug], query)]

    async def find(self, slug: str) -> App | None:
        async with self.db.connect() as conn:
            stored = await catalog.get(conn, slug)
        return stored or rules.BUILTIN_BY_SLUG.get(slug)

    async def get(self, slug: str) -> App:
        """The app of a name slug or, when no app has that slug, of an id (``app_OkrhR1``:
        Pipedream's ``GET /v1/apps/{id}``)."""
        found = await self.find(slug)
        if found is None and slug.startswith("app_"):
            found = next((a for a in await self.list() if a.id == slug), None)
        if found is None:
            raise errors.NotFound(f"no app {slug!r} in the catalog (GET /v1/apps lists them)")
        return found

    async def auth_free(self, props: Iterable[dict[str, Any]]) -> frozenset[str]:
        """The apps of ``props``' app props that take no connected account (``auth_type``
        ``none``): such a prop needs no account, and its ``$auth`` is ``{}``."""
        slugs = {str(p.get("app")) for p in props if p.get("type") == "app"}
        found = [await self.find(slug) for slug in sorted(slugs)]
        return frozenset(a.name_slug for a in found if a is not None and a.auth_type == "none")

    async def client_secret(self, slug: str) -> str | None:
        async with self.db.connect() as conn:
            return await catalog.client_secret(conn, self.cipher, slug)

    async def register(self, body: dict[str, Any]) -> App:
        """``POST /v1/apps``: a new app; a slug in use (stored or built in) is a conflict."""
        slug = rules.check_slug(body.get("name_slug"))
        if await self.find(slug) is not None:
            raise errors.Conflict(
                f"app {slug!r} exists; edit it with PUT /v1/apps/{slug}", field="name_slug"
            )
        if "name" not in body:
            raise errors.InvalidRequest("name is required", field="name")
        return await self._store(rules.registered(_without(body), None, slug), body, None)

    async def update(self, slug: str, body: dict[str, Any]) -> App:
        """``PUT /v1/apps/{slug}``: fields left out keep their value (a built-in's endpoints)."""
        before = await self.get(slug)
        if body.get("name_slug", slug) != slug:
            raise errors.InvalidRequest("name_slug cannot change", field="name_slug")
        app = rules.registered(_without(body), before, slug)
        return await self._store(app, body, before.id if before.builtin else None)

    async def add_imported(self, found: AppFile) -> tuple[Taken, str | None]:
        """An imported package's app (``domain/app_files.py``) added to the catalog, without
        managed auth (``App.managed_auth``): ``added``; or ``updated``, replacing (same id)
        the app imported before from an older version of the same package; else ``kept``
        with why, the slug's entry left as it is: a built-in, an operator's app (never
        overwritten), the app imported before from this version or a newer one, or from
        another package. The reason, for ``updated``: the version it replaced."""
        existing = await self.find(found.name_slug)
        if existing is not None and not self._replaced_by(existing, found):
            return "kept", self._kept(existing)
        app = App(
            found.name_slug,
            found.name,
            found.auth_type,
            description=f"Imported from {found.package} ({found.path}).",
            # What its code reads, as hints: an imported app takes credentials as given.
            fields=tuple(Field(f, f, optional=True) for f in found.fields)
            if found.auth_type == "keys"
            else (),
            imported_from=found.package,
            managed_auth=False,
        )
        try:
            async with self.db.begin() as conn:
                current = await catalog.get(conn, found.name_slug)
                # Changed since read (an operator's edit, another import): decide on it again.
                if current not in (None, existing) and not self._replaced_by(current, found):
                    return "kept", self._kept(current)
                now_s = self.clock.now_ms() // 1000
                await catalog.put(conn, self.cipher, app, secret=None, keep_id=None, now_s=now_s)
        except sa.exc.IntegrityError:  # registered at the same moment: theirs stays
            return "kept", self._kept(await self.find(found.name_slug))
        if current is None:
            return "added", None
        return "updated", f"replaces the app imported from {current.imported_from}"

    @staticmethod
    def _replaced_by(existing: App, found: AppFile) -> bool:
        return existing.imported_from is not None and app_files.supersedes(
            found.package, existing.imported_from
        )

    @staticmethod
    def _kept(existing: App | None) -> str | None:
        if existing is None:
            return None
        if existing.imported_from is not None:
            return f"imported before, from {existing.imported_from}"
        if existing.builtin:
            return "built in"
        return "registered by an operator"

    async def _store(self, app: App, body: dict[str, Any], keep_id: str | None) -> App:
        oauth = body.get("oauth")
        secret = oauth.get("client_secret") if isinstance(oauth, dict) else None
        if secret is not None and not isinstance(secret, str):
            raise errors.InvalidRequest(
                "oauth.client_secret is a string", field="oauth.client_secret"
            )
        async with self.db.begin() as conn:
            return await catalog.put(
                conn,
                self.cipher,
                app,
                secret=secret,
                keep_id=keep_id,
                now_s=self.clock.now_ms() // 1000,
            )


def _without(body: dict[str, Any]) -> dict[str, Any]:
    """The body without what ``domain/apps.registered`` does not decide on."""
    known = {
        "name_slug",
        "name",
        "auth_type",
        "description",
        "categories",
        "img_src",
        "custom_fields",
        "oauth",
    }
    unknown = set(body) - known
    if unknown:
        field = sorted(unknown)[0]
        raise errors.InvalidRequest(f"unknown field {field!r}", field=field)
    return body
