"""Imported OAuth apps whose app file spreads a shared module (``{...commonApp, app: "brex"}``,
the ``$auth`` reads in ``common-app.mjs``) join the catalog as OAuth apps, on both dialects.

The real published tarballs (``npm pack``, cached in ``.test-cache/npm-store`` as the other
npm tests do); only their app file and the modules it reaches are imported, so the test reads
the packages' own code without loading every component in Node (``tests/e2e`` does that).
"""

from __future__ import annotations

import pytest

from sluice.domain import app_files
from sluice.domain import packages as layout_rules
from sluice.engine.components.registry_import import RegistryImports
from sluice.platform import Platform
from sluice.runtime.packages import Package, PackageFetcher
from tests.conftest import Api, account_client

pytestmark = [pytest.mark.npm, pytest.mark.timeout(600)]

#: The packages issue 27 measured as ``auth_type: none`` before, with the fields they read.
PACKAGES = {
    "@pipedream/brex@0.1.1": ("brex", ("oauth_access_token",)),
    "@pipedream/docusign@0.2.2": ("docusign", ("oauth_access_token",)),
    "@pipedream/youtube_data_api@1.0.1": ("youtube_data_api", ("oauth_access_token",)),
    "@pipedream/shopify@0.6.8": ("shopify", ("shop_id", "oauth_access_token")),
}


class AppOnly(PackageFetcher):
    """The real package, less its components: the app file, what it imports, package.json."""

    def __init__(self, real: PackageFetcher) -> None:
        self.real = real

    async def fetch(self, spec: str, *, offline_first: bool = False) -> Package:
        package = await self.real.fetch(spec, offline_first=offline_first)
        app_file = f"{package.name.rsplit('/', 1)[-1]}.app.mjs"
        assert app_file in package.files, sorted(package.files)
        return Package(
            package.name,
            package.version,
            layout_rules.component_files(package.files, app_file),
        )


async def test_apps_that_spread_a_common_module_are_oauth_apps(
    platform: Platform, api: Api
) -> None:
    fetcher = AppOnly(platform.registry_imports.fetcher)
    imports = RegistryImports(platform.db, platform.components, fetcher, platform.catalog)
    async with account_client(platform, "importer", is_admin=True) as admin:
        for spec, (slug, fields) in PACKAGES.items():
            package = await platform.registry_imports.fetcher.fetch(spec, offline_first=True)
            # The shape issue 27 measured: the app file itself never names $auth.
            assert "$auth" not in package.files[f"{slug}.app.mjs"], spec
            report = await imports.import_package(admin.account_id, spec)
            assert report.error is None and report.app is not None, report
            assert (report.app.name_slug, report.app.auth_type) == (slug, "oauth"), report.app
            found = (await api.client.get(f"/v1/apps/{slug}")).json()["data"]
            assert found["auth_type"] == "oauth", found
            assert found["imported_from"] == spec, found
            # What its methods read, through the spread module.
            found_file = app_files.app_file(package.name, package.version, package.files)
            assert found_file is not None and found_file.fields == fields, found_file
