"""``POST /v1/registry/imports``: fill the public registry from ``@pipedream/*`` npm packages
or from app directories of Pipedream's monorepo sent as files.

Admin keys only. Each package is fetched from the npm registry and every component it holds
is saved under its own key and version (docs/api.md, "Importing Pipedream's packages").
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sluice import errors
from sluice.api import render
from sluice.api.auth import AccountDep, PlatformDep
from sluice.api.schemas import RegistryImport
from sluice.domain import packages as package_rules

router = APIRouter()


@router.post("/v1/registry/imports")
async def import_packages(
    body: RegistryImport, account: AccountDep, platform: PlatformDep
) -> dict[str, Any]:
    """Import published packages into the public registry; answers a report per package."""
    if not account.is_admin:
        raise errors.Forbidden(
            "only admin accounts import into the public registry (sluice accounts create --admin)"
        )
    if not body.packages and not body.directories:
        raise errors.InvalidRequest("give packages or directories", field="packages")
    for spec in body.packages:  # every spec checked before any is fetched
        package_rules.parse_spec(spec)
    reports = await platform.registry_imports.import_packages(account.id, body.packages)
    for files in body.directories:
        reports.append(await platform.registry_imports.import_tree(account.id, files))
    return {"data": {"packages": [render.package_import(r) for r in reports]}}
