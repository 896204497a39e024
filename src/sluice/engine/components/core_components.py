"""Core components: the sources and actions Sluice writes and ships, put into the public
registry of every install at start.

They live in ``src/sluice/core_components/``, one folder per app laid out as a registry
package is (``http/sources/new-requests/new-requests.mjs``, ``filter/common/*.mjs``; see
``domain/packages.py``), and are owned by the system account (``accounts.SYSTEM_ID``). At each
start every component is compared with the registry by its code hash: one already there costs
a query and no Node; a changed one is loaded, checked under the registry's strict rules and
published as its key's newest version, so an upgrade of Sluice brings new versions while the
sources deployed from older ones keep running the code they were deployed with. Processes
starting together may both publish a version: the registry's unique index keeps one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.domain import component_files as files_rules
from sluice.domain import packages as layout_rules
from sluice.domain import registry as registry_rules
from sluice.engine.components.components import ComponentInput, Components
from sluice.storage import accounts
from sluice.storage import components as store
from sluice.storage.tables import saved_components

log = logging.getLogger(__name__)

#: The components shipped in the package.
CORE_DIR = Path(__file__).resolve().parents[2] / "core_components"

SeedOutcome = Literal["present", "published", "kept", "failed"]
#: Components loaded in Node at once when a start finds new ones (each key is its own, so
#: their publications do not race each other).
PUBLISH_CONCURRENCY = 4


@dataclass(frozen=True)
class Seeded:
    """What became of one shipped component: ``present`` (this code is in the registry),
    ``published`` (a new version now is), ``kept`` (the registry has this or a newer
    version with other code: ``reason``), ``failed`` (it did not load: ``reason``)."""

    path: str
    outcome: SeedOutcome
    key: str | None = None
    version: str | None = None
    reason: str | None = None


def shipped(root: Path = CORE_DIR) -> dict[str, tuple[str, dict[str, str]]]:
    """``{"<app>/<entry path>": (entry path, files it needs)}`` of every component under
    ``root``, read from disk (blocking; a few dozen small files)."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    for app_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        files = {
            f.relative_to(app_dir).as_posix(): f.read_text(encoding="utf-8")
            for f in sorted(app_dir.rglob("*"))
            if f.is_file()
        }
        for entry in layout_rules.layout(list(files)).components:
            found[f"{app_dir.name}/{entry}"] = (entry, layout_rules.component_files(files, entry))
    return found


async def _present(path: str) -> Seeded:
    return Seeded(path, "present")


class CoreComponents:
    def __init__(
        self, db: AsyncEngine, components: Components, clock: Clock, root: Path = CORE_DIR
    ) -> None:
        self.db = db
        self.components = components
        self.clock = clock
        self.root = root

    async def seed(self) -> list[Seeded]:
        """Publish every shipped component whose code the registry does not have yet."""
        tree = shipped(self.root)
        async with self.db.begin() as conn:
            try:
                async with conn.begin_nested():
                    await accounts.ensure_system(conn, now_s=self.clock.now_ms() // 1000)
            except sa.exc.IntegrityError:
                pass  # another process made it first
        hashes = {
            path: files_rules.code_hash(entry, files) for path, (entry, files) in tree.items()
        }
        async with self.db.connect() as conn:
            rows = await conn.execute(
                sa.select(saved_components.c.code_hash).where(
                    saved_components.c.registry,
                    saved_components.c.owner_id == accounts.SYSTEM_ID,
                    saved_components.c.code_hash.in_(list(hashes.values())),
                )
            )
            present = {r.code_hash for r in rows}
        # A fresh install loads every component in Node, a few at a time, in one realm (they
        # are Sluice's own; the modules they share load once), ended when all are read.
        gate = asyncio.Semaphore(PUBLISH_CONCURRENCY)
        realm = f"core-{ids.random_token(8)}"

        async def publish(path: str, entry: str, files: dict[str, str]) -> Seeded:
            async with gate:
                return await self._publish(path, entry, files, realm)

        try:
            report = list(
                await asyncio.gather(
                    *(
                        publish(path, entry, files)
                        if hashes[path] not in present
                        else _present(path)
                        for path, (entry, files) in tree.items()
                    )
                )
            )
        finally:
            if len(present) < len(tree):
                await self.components.end_realm(accounts.SYSTEM_ID, realm)
        counts = {o: sum(1 for r in report if r.outcome == o) for o in get_args(SeedOutcome)}
        log.info("core components checked", extra={"action": "core_components", **counts})
        for r in report:
            if r.outcome in ("kept", "failed"):
                log.warning(
                    "core component %s: %s",
                    r.path,
                    r.reason,
                    extra={"action": "core_component", "outcome": r.outcome, "key": r.key},
                )
        return report

    async def _publish(self, path: str, entry: str, files: dict[str, str], realm: str) -> Seeded:
        others = dict(files)
        source = ComponentInput(code=others.pop(entry), entry_path=entry, files=others)
        try:
            checked = await self.components.check(
                accounts.SYSTEM_ID, source, registry=True, compat=False, realm=realm
            )
        except errors.SluiceError as exc:
            return Seeded(path, "failed", reason=exc.message)
        key, version = str(checked.shape.key), checked.shape.version
        async with self.db.connect() as conn:
            published = [c.version for c in await store.registry_versions(conn, key)]
        newest = registry_rules.latest(published)
        if newest is not None and registry_rules.ordered([newest, version])[-1] == newest:
            why = (
                f"the registry has {key} {newest} already, which this code does not replace: "
                "give the shipped file a newer version"
            )
            return Seeded(path, "kept", key, version, why)
        saved = await self.components.record(accounts.SYSTEM_ID, checked, registry=True)
        try:
            await self.components.insert(saved)
        except errors.Conflict:
            return Seeded(path, "present", key, version)  # another process published it
        return Seeded(path, "published", key, version)
