"""Filling the public registry from published ``@pipedream/<app>`` npm packages, or from app
directories of Pipedream's monorepo (``components/<app>/``, sent as files: ``import_tree``).

Each package is fetched whole (``runtime/packages.py``), sorted into components and the
modules they import (``domain/packages.py``), and each component is saved into the registry
under its own key and version with the files it needs, under the compatibility rules (the
spec's rules Pipedream's own components break are waived, each waiver a warning on the
component). Importing a version that is already there changes nothing; a newer version adds
one. Every component is reported: loaded, skipped (why) or failed (the error). The package's
app file puts its app into the app catalog (``AppCatalog.add_imported``), unless the catalog
has that app already (built in, an operator's, or imported before).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field, replace
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.domain import app_files
from sluice.domain import packages as layout_rules
from sluice.domain import registry as registry_rules
from sluice.engine.auth.app_catalog import AppCatalog, Taken
from sluice.engine.components.components import Checked, ComponentInput, Components
from sluice.runtime.packages import Package, PackageFetcher
from sluice.storage import components as store

log = logging.getLogger(__name__)

Status = Literal["loaded", "skipped", "failed"]

#: Components checked at once (each loads in a Node worker; npm installs are shared).
_CONCURRENCY = 2
#: Packages imported at once: fetching a package and installing its components' dependency
#: sets wait on the npm registry (seconds each when npm's cache is cold), not on this machine.
_PACKAGES_AT_ONCE = 3


@dataclass(frozen=True)
class ComponentReport:
    path: str
    status: Status
    key: str | None = None
    version: str | None = None
    component_type: str | None = None
    id: str | None = None
    #: Why it was skipped, or the error it failed with.
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AppReport:
    """The package's app, as the catalog took it: ``added``; ``updated`` (it replaced the app
    imported from an older version: ``reason`` names it); or ``kept`` (``reason``: why the
    catalog's entry stays as it was)."""

    name_slug: str
    name: str
    auth_type: str
    status: Taken
    reason: str | None = None


@dataclass(frozen=True)
class PackageReport:
    spec: str
    name: str | None = None
    version: str | None = None
    components: list[ComponentReport] = field(default_factory=list)
    #: Files that are not components: ``{path: what it is}``.
    modules: dict[str, str] = field(default_factory=dict)
    #: Set when the package itself could not be fetched.
    error: str | None = None
    #: Its app file's app (None: the package has no app file).
    app: AppReport | None = None

    def count(self, status: Status) -> int:
        return sum(1 for c in self.components if c.status == status)


class RegistryImports:
    def __init__(
        self,
        db: AsyncEngine,
        components: Components,
        fetcher: PackageFetcher,
        catalog: AppCatalog,
    ) -> None:
        self.db = db
        self.components = components
        self.fetcher = fetcher
        self.catalog = catalog
        # One import of a key at a time: two components (or two imports) with the same key
        # and version would otherwise both pass the "already there" check.
        self._lock = asyncio.Lock()

    async def import_packages(self, owner_id: str, specs: list[str]) -> list[PackageReport]:
        """``import_package`` for each spec, a report per spec in their order.

        Up to ``_PACKAGES_AT_ONCE`` packages are imported at once; specs of one package (two
        versions of it) are imported one after the other in the order given, so which version
        a key's registry entry gets first does not depend on timing.
        """
        gate = asyncio.Semaphore(_PACKAGES_AT_ONCE)
        by_name: dict[str, list[int]] = {}
        for index, spec in enumerate(specs):
            by_name.setdefault(layout_rules.parse_spec(spec).name, []).append(index)
        reports: list[PackageReport | None] = [None] * len(specs)

        async def one_name(indexes: list[int]) -> None:
            for index in indexes:
                async with gate:
                    reports[index] = await self.import_package(owner_id, specs[index])

        async with asyncio.TaskGroup() as group:  # one failing cancels the others
            for indexes in by_name.values():
                group.create_task(one_name(indexes))
        return [r for r in reports if r is not None]

    async def import_package(self, owner_id: str, spec: str) -> PackageReport:
        """Import every component of one package into the public registry."""
        parsed = layout_rules.parse_spec(spec)
        try:
            package = await self.fetcher.fetch(str(parsed), offline_first=parsed.exact)
        except errors.SluiceError as exc:
            return PackageReport(str(parsed), parsed.name, error=exc.message)
        return await self._import(owner_id, str(parsed), package)

    async def import_tree(self, owner_id: str, files: dict[str, str]) -> PackageReport:
        """Import one app directory of Pipedream's monorepo (``components/<app>/``: its
        ``package.json`` names the package and version), laid out as its npm package is.
        Its dependencies are installed from its ``package.json`` as a package's are."""
        name, version = _package_json(files)
        package = Package(name, version, layout_rules.tree_files(files, ""))
        return await self._import(owner_id, f"{name}@{version} (directory)", package)

    async def _import(self, owner_id: str, spec: str, package: Package) -> PackageReport:
        found = layout_rules.layout(list(package.files))
        app = await self._import_app(package.name, package.version, package.files)
        gate = asyncio.Semaphore(_CONCURRENCY)
        # The package's components load in one realm: the modules they share load once.
        realm = f"import-{ids.random_token(8)}"

        async def one(entry: str) -> ComponentReport:
            async with gate:
                files = layout_rules.component_files(package.files, entry)
                return await self._import_component(owner_id, entry, files, realm)

        try:
            reports = await asyncio.gather(*(one(entry) for entry in found.components))
        finally:
            await self.components.end_realm(owner_id, realm)
        log.info(
            "package imported",
            extra={
                "action": "registry_import",
                "package": package.name,
                "version": package.version,
                "owner_id": owner_id,
                "loaded": sum(1 for r in reports if r.status == "loaded"),
                "failed": sum(1 for r in reports if r.status == "failed"),
            },
        )
        return PackageReport(
            spec, package.name, package.version, list(reports), found.modules, app=app
        )

    async def _import_app(self, name: str, version: str, files: dict[str, str]) -> AppReport | None:
        found = app_files.app_file(name, version, files)
        if found is None:
            return None
        async with self._lock:
            status, reason = await self.catalog.add_imported(found)
        return AppReport(found.name_slug, found.name, found.auth_type, status, reason)

    async def _import_component(
        self, owner_id: str, entry: str, files: dict[str, str], realm: str
    ) -> ComponentReport:
        code = files.pop(entry)
        source = ComponentInput(code=code, entry_path=entry, files=files)
        try:
            # The public registry's dependency sets are the operator's, not the importing
            # admin's: not counted in its npm quota (nor installed one at a time, as one
            # account's are), or importing a dozen packages would fill it.
            checked = await self.components.check(
                owner_id, source, registry=True, compat=True, realm=realm, npm_quota=False
            )
        except errors.SluiceError as exc:
            return ComponentReport(entry, "failed", reason=exc.message)
        async with self._lock:
            return await self._store(owner_id, entry, checked)

    async def _store(self, owner_id: str, entry: str, checked: Checked) -> ComponentReport:
        shape = checked.shape
        key = str(shape.key)
        report = ComponentReport(
            entry,
            "loaded",
            key,
            shape.version,
            shape.kind,
            warnings=list(shape.warnings),
        )
        async with self.db.connect() as conn:
            published = await store.registry_versions(conn, key)
        same = next((c for c in published if c.version == shape.version), None)
        if same is not None:
            why = f"{key} {shape.version} is already in the registry"
            return replace(report, status="skipped", id=same.id, reason=why)
        newest = registry_rules.latest([c.version for c in published])
        if newest is not None and registry_rules.ordered([newest, shape.version])[-1] == newest:
            why = f"the registry has a newer version of {key}: {newest}"
            return replace(report, status="skipped", reason=why)
        saved = await self.components.record(owner_id, checked, registry=True)
        await self.components.insert(saved)
        return replace(report, id=saved.id)


def _package_json(files: dict[str, str]) -> tuple[str, str]:
    """The ``name`` and ``version`` of an app directory's ``package.json``."""
    try:
        meta = json.loads(files.get("package.json") or "")
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise errors.InvalidRequest(
            "the directory has no package.json (an app directory of Pipedream's monorepo, "
            "components/<app>/, has one)",
            field="directories",
        )
    name, version = meta.get("name"), meta.get("version")
    if not isinstance(name, str) or not name or not isinstance(version, str) or not version:
        raise errors.InvalidRequest(
            "the directory's package.json needs a name and a version", field="directories"
        )
    return name, version
