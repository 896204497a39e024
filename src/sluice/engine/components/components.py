"""Saving components: files → dependencies → Node loads it → rules checked → stored.

A component is an entry file plus the files it imports by relative path, as registry
components are laid out (``actions/x/x.mjs`` importing ``../../app.app.mjs``). On disk it lives
in ``<data_dir>/components/<code_hash>/`` (the files, with pinned specifiers rewritten, and a
``node_modules`` link into the npm store). The database holds the files too, so the tree is
rebuilt on a new machine or after the data directory was cleaned. The rules of the files as
given (paths, sizes, the entry's name) are ``domain/component_files.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import re
import shutil
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors, ids
from sluice.clock import Clock
from sluice.config import Settings
from sluice.domain import component_files as files_rules
from sluice.domain import components as rules
from sluice.domain import imports
from sluice.domain import registry as registry_rules
from sluice.domain.components import SavedComponent, User
from sluice.engine.components import fetch, invocations
from sluice.engine.outbound import http_clients
from sluice.runtime import protocol
from sluice.runtime.deps import DependencyStore
from sluice.runtime.port import Runner
from sluice.runtime.sandbox import JS_DIR
from sluice.storage import components as store

log = logging.getLogger(__name__)

_CACHE_SIZE = 2048


@dataclass(frozen=True)
class ComponentInput:
    """What a client sends: the entry's code (or a URL) and the files it imports."""

    code: str | None = None
    url: str | None = None
    entry_path: str | None = None
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepared:
    entry_path: str
    files: dict[str, str]
    code_hash: str
    dependencies: dict[str, str]
    directory: Path

    @property
    def entry(self) -> Path:
        return self.directory / self.entry_path


@dataclass(frozen=True)
class Checked:
    """A component laid out, loaded and checked, not yet stored."""

    prepared: Prepared
    info: dict[str, Any]
    shape: rules.Shape
    url: str | None


class Components:
    def __init__(
        self,
        db: AsyncEngine,
        pool: Runner,
        deps: DependencyStore,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self.db = db
        self.pool = pool
        self.deps = deps
        self.settings = settings
        #: Parsed once: a bad SLUICE_EGRESS_ALLOW fails at start, not at the first fetch.
        self.egress = http_clients.fetch_policy(settings)
        self.clock = clock
        # Saved components are immutable rows (an update saves a new one), so a process-local
        # cache by id is always right; it spares the hot path a database round trip.
        self._cache: OrderedDict[str, SavedComponent] = OrderedDict()

    async def by_id(self, component_id: str) -> SavedComponent:
        """The saved component behind a deployment (any owner: the caller checked ownership)."""
        cached = self._cache.get(component_id)
        if cached is not None:
            self._cache.move_to_end(component_id)
            return cached
        async with self.db.connect() as conn:
            found = await store.get_any(conn, component_id)
        if found is None:
            raise errors.InternalError(f"saved component {component_id} is missing")
        self._cache[component_id] = found
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    async def save(
        self,
        owner_id: str,
        source: ComponentInput,
        *,
        registry: bool = False,
        compat: bool | None = None,
    ) -> SavedComponent:
        """Save a component to the account, or (``registry``) publish it to the public
        registry, where its key and semantic version are checked. ``compat``: the
        compatibility rules (default: the ``component_rules`` setting's choice)."""
        if not registry and source.code is not None:
            # The same files saved again (a redeploy, a second `sluice publish`, a deploy
            # aborted at a prompt and tried again) are the component already saved.
            entry_path, files = self._laid_out(source)
            async with self.db.connect() as conn:
                same = await store.find_by_hash(
                    conn, owner_id, files_rules.code_hash(entry_path, files)
                )
            if same is not None:
                return same
        checked = await self.check(owner_id, source, registry=registry, compat=compat)
        if registry:
            async with self.db.connect() as conn:
                published = await store.registry_versions(conn, str(checked.shape.key))
            registry_rules.check_newer(
                str(checked.shape.key), checked.shape.version, [c.version for c in published]
            )
        saved = await self.record(owner_id, checked, registry=registry)
        await self.insert(saved)
        log.info(
            "component saved",
            extra={"action": "component_saved", "component_id": saved.id, "owner_id": owner_id},
        )
        return saved

    async def check(
        self,
        owner_id: str,
        source: ComponentInput,
        *,
        registry: bool = False,
        compat: bool | None = None,
        realm: str | None = None,
        npm_quota: bool = True,
    ) -> Checked:
        """Lay the component out, load it in Node and apply the authoring rules (nothing
        stored): the spec's, or with ``compat`` the compatibility rules, whose waivers end
        up in ``shape.warnings``. ``realm``: loaded beside the other components of its
        package (``inspect``). ``npm_quota``: its dependencies are installed as the account's,
        within its npm quota (off for an admin's import into the public registry: the
        operator's, not the account's)."""
        compat = self.settings.compat_rules if compat is None else compat
        url = source.url
        if source.code is None:
            source = await self._fetch(source)
        prepared = await self.prepare(source, owner_id if npm_quota else None)
        info = await self.inspect(owner_id, prepared, realm=realm)
        shape = rules.validate_shape(info, compat=compat)
        if registry:
            app_slugs = [
                str(p.get("app")) for p in shape.configurable_props if p.get("type") == "app"
            ]
            registry_rules.check(
                shape.key,
                shape.version,
                shape.name,
                app_slugs,
                warnings=shape.warnings if compat else None,
            )
        return Checked(prepared, info, shape, url)

    async def record(self, owner_id: str, checked: Checked, *, registry: bool) -> SavedComponent:
        """The row a checked component is saved as (not stored yet)."""
        shape, prepared, info = checked.shape, checked.prepared, checked.info
        now_s = self.clock.now_ms() // 1000
        if shape.key and not registry:
            now_s = await self._created_at(owner_id, shape.key, now_s)
        return SavedComponent(
            id=ids.new_id("sc"),
            owner_id=owner_id,
            key=shape.key,
            name=shape.name,
            version=shape.version,
            component_type=shape.kind,
            description=shape.description,
            entry_path=prepared.entry_path,
            # What the user sent, pinned specifiers intact; the tree on disk is rewritten.
            files=dict(prepared.files),
            code_hash=prepared.code_hash,
            dependencies=prepared.dependencies,
            component_url=checked.url,
            shape={**info, "warnings": shape.warnings} if shape.warnings else info,
            configurable_props=shape.configurable_props,
            registry=registry,
            created_at=now_s,
            updated_at=now_s,
        )

    async def _fetch(self, source: ComponentInput) -> ComponentInput:
        """A component given by ``component_url`` only: its entry file's code, fetched with
        the files it imports by relative path."""
        url = source.url
        if not url:
            raise errors.InvalidRequest(
                "give component_code (the entry file's code) or component_url",
                field="component_code",
            )
        fetched = await fetch.fetch_component(
            url,
            time_limit=self.settings.fetch_timeout_seconds,
            max_bytes=self.settings.fetch_max_bytes,
            policy=self.egress,
        )
        # One file: named by the URL when that is a code file's name (else by its syntax).
        entry: str | None = fetched.entry_path
        if not fetched.files:
            entry = files_rules.entry_from_url(posixpath.basename(fetched.entry_path))
        return ComponentInput(
            fetched.code, url, source.entry_path or entry, {**fetched.files, **source.files}
        )

    async def _created_at(self, owner_id: str, key: str, now_s: int) -> int:
        """The creation time of a new version of the account's component ``key``."""
        async with self.db.connect() as conn:
            previous = await store.get_by_key(conn, owner_id, key)
        if previous is not None and previous.created_at >= now_s:
            # The newest with a key wins lookups, by created_at (seconds): a re-publish
            # within the same second must still sort after the version it replaces.
            return previous.created_at + 1
        return now_s

    async def insert(self, saved: SavedComponent) -> None:
        """Store a recorded component (``Conflict`` if its key and version were published
        meanwhile)."""
        try:
            async with self.db.begin() as conn:
                await store.insert(conn, saved)
        except sa.exc.IntegrityError as exc:
            raise errors.Conflict(
                f"{saved.key} {saved.version} was published at the same time; publish a newer "
                "version",
                field="version",
            ) from exc

    def _laid_out(self, source: ComponentInput) -> tuple[str, dict[str, str]]:
        """The entry's path and every file (the entry's included), checked."""
        files = files_rules.normalize_files(
            source.files, source.code, self.settings.max_component_bytes
        )
        entry_path = source.entry_path and files_rules.clean_path(
            source.entry_path, "component_path"
        )
        entry_path = entry_path or files_rules.default_entry_name(source.code or "")
        files[entry_path] = source.code or ""
        return entry_path, files

    async def users(self, owner_id: str) -> dict[str, list[User]]:
        """Who runs each of the account's components (``{sc_ id: [source or workflow]}``)."""
        async with self.db.connect() as conn:
            return await store.users(conn, owner_id)

    async def delete(self, owner_id: str, component_id: str) -> None:
        """Delete one of the account's saved components that nothing runs (``Conflict``
        naming the sources and workflows that run it; ``NotFound`` for another account's or
        a registry component)."""
        async with self.db.begin() as conn:
            using = (await store.users(conn, owner_id)).get(component_id, [])
            if using:
                names = ", ".join(f"{u.kind} {u.name} ({u.id})" for u in using)
                raise errors.Conflict(
                    f"{component_id} is in use by {names}: move or delete those first",
                    field="component_id",
                )
            if not await store.delete(conn, owner_id, component_id):
                raise errors.NotFound(f"component {component_id} not found")
        self._cache.pop(component_id, None)
        log.info(
            "component deleted",
            extra={
                "action": "component_deleted",
                "component_id": component_id,
                "owner_id": owner_id,
            },
        )

    async def prepare(self, source: ComponentInput, owner_id: str | None = None) -> Prepared:
        """Check the files, install what they import, and lay them out on disk; with
        ``owner_id`` (an account saving it) within the account's npm quota."""
        entry_path, files = self._laid_out(source)
        code_hash = files_rules.code_hash(entry_path, files)
        package_json = files_rules.nearest_package_json(files, entry_path)
        plan = imports.plan_dependencies(files, package_json)
        store_dir = await self.deps.ensure(plan, owner_id)
        directory = self.settings.components_dir / code_hash
        if not (directory / entry_path).exists():
            await self._write_tree(directory, plan.files, store_dir)
        return Prepared(entry_path, files, code_hash, dict(plan.dependencies), directory)

    async def _write_tree(
        self, directory: Path, files: dict[str, str], store_dir: Path | None
    ) -> None:
        tmp = directory.parent / f".tmp-{directory.name}-{ids.random_token(6)}"
        tmp.mkdir(parents=True)
        try:
            for path, text in files.items():
                target = tmp / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            await self.deps.link(store_dir, tmp)
            try:
                os.rename(tmp, directory)
            except OSError:
                # Another save of the same code won the race; its tree is identical.
                if not os.path.isdir(directory):  # noqa: ASYNC240 - one stat
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    async def materialize(self, component: SavedComponent) -> Path:
        """The entry file of a saved component on disk, rebuilt from the database if needed."""
        directory = self.settings.components_dir / component.code_hash
        entry = directory / component.entry_path
        if entry.exists():
            return entry
        source = ComponentInput(
            code=component.code,
            entry_path=component.entry_path,
            files={p: t for p, t in component.files.items() if p != component.entry_path},
        )
        prepared = await self.prepare(source)
        return prepared.entry

    async def inspect(
        self, owner_id: str, prepared: Prepared, *, realm: str | None = None
    ) -> dict[str, Any]:
        """Load the code in Node and describe it (``invocations.of_inspection``: in a worker
        of its own, or in ``realm`` beside the other components of its package)."""
        result = await self.pool.invoke(
            invocations.of_inspection(
                self.settings,
                owner_id,
                prepared.code_hash,
                prepared.entry,
                ids.random_token(8),
                realm=realm,
            )
        )
        if not result.ok or not isinstance(result.value, dict):
            error = result.error or {}
            if error.get("name") == "SyntaxError" and str(prepared.directory) not in str(
                error.get("stack") or ""
            ):
                # Node's import() SyntaxError carries no location; `node --check` prints it.
                where = await self._syntax_location(prepared.entry)
                if where:
                    error["stack"] = f"{where}\n{error.get('stack') or ''}"
            raise load_error(result, prepared.directory)
        return result.value

    async def end_realm(self, owner_id: str, realm: str) -> None:
        """Stop the worker of an inspection ``realm`` (its package's import is over)."""
        await self.pool.evict(owner_id, invocations.realm_key(realm))

    async def _syntax_location(self, entry: Path) -> str | None:
        """``/…/file.mjs:2`` for the first syntax error of ``entry``'s own file, if any."""
        try:
            proc = await asyncio.create_subprocess_exec(
                self.settings.node,
                "--check",
                str(entry),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        except OSError:
            return None
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return None
        first = err.decode(errors="replace").splitlines()[:1]
        return first[0] if first and re.match(r"^/.+:\d+$", first[0]) else None


def load_error(result: protocol.Result, directory: Path) -> errors.SluiceError:
    error = result.error or {"code": "LOAD_FAILED", "name": "Error", "message": "unknown"}
    code = error.get("code")
    if code == protocol.NOT_A_COMPONENT:
        return errors.InvalidComponent(
            "the module must export a component object: `export default { ... }` or "
            "`module.exports = { ... }`"
        )
    if code == protocol.NO_RUN:
        return errors.InvalidComponent("run is required: an (async) function", field="run")
    if code == protocol.TIMEOUT:
        return errors.ComponentLoadFailed("loading the component timed out")
    message = f"{error.get('name', 'Error')}: {error.get('message', '')}"
    location = _first_location(error.get("stack") or "", directory)
    if location and location not in message:
        message += f" ({location})"
    return errors.ComponentLoadFailed(
        "the component could not be loaded: " + scrub_paths(message, directory)
    )


def scrub_paths(text: str, directory: Path) -> str:
    """Show component files by their relative path, never the server's directories; the
    frames of Sluice's own runtime are left out (as a workflow step's are)."""
    runtime = (str(JS_DIR), str(JS_DIR.resolve()))
    lines = [line for line in text.split("\n") if not any(r in line for r in runtime)]
    text = "\n".join(lines)
    text = text.replace(f"file://{directory}/", "").replace(f"{directory}/", "")
    # A path outside the component's tree (a relative import that goes above it, a package in
    # the npm store) is shown relative to the tree, or from its node_modules/ on.
    return _ABSOLUTE.sub(lambda m: _outside(m.group(1), directory), text)


#: An absolute path (or file URL) standing alone: not part of a URL or of a relative path.
_ABSOLUTE = re.compile(r"(?<![\w:/.~-])(?:file://)?(/[^\s'\"():,]+)")


def _outside(path: str, directory: Path) -> str:
    """A server path shown without the server's directories; any other absolute path (an
    API path in a message, ``/v1/things``, a file of the user's own ``/tmp``) as it is."""
    if "/node_modules/" in path:
        return "node_modules/" + path.split("/node_modules/", 1)[1]
    # The server's: it shares at least two leading directories with the component's tree.
    shared = os.path.commonpath([path, str(directory)])
    if len(Path(shared).parts) < 3:
        return path
    relative = os.path.relpath(path, directory)
    if relative.count("../") <= 3 and Path(path).suffix:
        return relative
    return f"…/{Path(path).name}"


def _first_location(stack: str, directory: Path) -> str | None:
    for line in stack.splitlines():
        if str(directory) in line:
            m = re.search(re.escape(str(directory)) + r"/([^\s):]+(?::\d+)*)", line)
            if m:
                return m.group(1)
    return None
