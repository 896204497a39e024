"""``/v1/components``: save a component, read it back."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import ComponentCreate, ComponentFiles
from sluice.domain import component_search
from sluice.domain import registry as registry_rules
from sluice.platform import ComponentInput

router = APIRouter()


def component_input(body: ComponentFiles) -> ComponentInput | None:
    if body.component_code is None and body.component_url is None:
        if body.files or body.component_path:
            raise errors.InvalidRequest(
                "files need component_code: the entry file's code", field="component_code"
            )
        return None
    return ComponentInput(
        code=body.component_code,
        url=body.component_url,
        entry_path=body.component_path,
        files=body.files or {},
    )


@router.post("/v1/components")
async def create(
    body: ComponentCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    source = component_input(body)
    if source is None:
        raise errors.InvalidRequest("give component_code or component_url", field="component_code")
    saved = await platform.components.save(account.id, source)
    return {"data": render.component(saved)}


@router.post("/v1/components/registry")
async def publish_to_registry(
    body: ComponentCreate, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    """Publish to the public registry (admin keys only): every account can deploy it by key."""
    if not account.is_admin:
        raise errors.Forbidden(
            "only admin accounts publish to the public registry (sluice accounts create --admin)"
        )
    source = component_input(body)
    if source is None:
        raise errors.InvalidRequest("give component_code or component_url", field="component_code")
    saved = await platform.components.save(account.id, source, registry=True)
    return {"data": render.component(saved)}


@router.get("/v1/components/registry")
async def search_registry(
    account: AccountDep,
    platform: PlatformDep,
    q: Annotated[
        str, Query(max_length=200, description="Text in the key, name or description.")
    ] = "",
    type: Annotated[
        Literal["source", "action"] | None, Query(description="Only sources or only actions.")
    ] = None,
) -> dict[str, Any]:
    """The public registry's components (the newest version of each key) matching ``q``, by
    key, without their code."""
    found = await platform.registry_search(q, component_type=type)
    data = []
    for component in found:
        item = render.component(component)
        del item["code"]
        data.append(item)
    return {"data": data}


#: The most keys of each type ``GET /v1/components/search`` answers.
SEARCH_LIMIT = 10


@router.get("/v1/components/search")
async def search(
    account: AccountDep,
    platform: PlatformDep,
    query: Annotated[str, Query(min_length=1, max_length=1000, description="A sentence.")],
    app: Annotated[str | None, Query(max_length=100, description="An app's name slug.")] = None,
    similarity_threshold: Annotated[float, Query(ge=0, le=1)] = 0.0,
    debug: bool = False,
) -> dict[str, Any]:
    """Pipedream's search of the registry by a sentence: ``{"sources": [key, ...], "actions":
    [key, ...]}``, best first (``domain/component_search.py`` says how they are scored)."""
    candidates = [
        component_search.Candidate(
            c.key or "",
            c.component_type,
            (
                (c.key or "").split("-", 1)[0],
                *(str(p.get("app")) for p in c.configurable_props if p.get("type") == "app"),
            ),
            c.name,
            c.description,
        )
        for c in await platform.registry_search("")
    ]
    found = component_search.rank(query, candidates, app=app, threshold=similarity_threshold)
    data: dict[str, Any] = {
        kind + "s": [m.key for m in found if m.component_type == kind][:SEARCH_LIMIT]
        for kind in ("source", "action")
    }
    if debug:
        data["debug"] = {
            "scores": {m.key: m.score for m in found[: 2 * SEARCH_LIMIT]},
            "method": "share of the query's words in the key, name and description",
        }
    return data


@router.get("/v1/components/registry/{key}")
async def read_registry(key: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    """The newest version of a registry component."""
    versions = await platform.registry_versions(key)
    newest = registry_rules.latest([c.version for c in versions])
    found = next((c for c in versions if c.version == newest), None)
    if found is None:
        raise errors.NotFound(f"no registry component with key {key!r}")
    data = render.component(found)
    data["versions"] = registry_rules.ordered([c.version for c in versions])
    return {"data": data}


@router.get("/v1/components/{key_or_id}")
async def read(key_or_id: str, account: AccountDep, platform: PlatformDep) -> dict[str, Any]:
    found = await platform.find_component(account.id, key_or_id)
    if found is None:
        raise errors.NotFound(f"component {key_or_id} not found")
    return {"data": render.component(found)}
