"""The app files of imported ``@pipedream/*`` packages go into the app catalog, on both
dialects: real Node loads the components, the real catalog and API answer. The npm registry
(the outside world) is replaced by a fetcher that hands over a package's files; the import of
real published packages is ``tests/e2e/test_registry_import.py``'s."""

from __future__ import annotations

import asyncio
import json
import secrets

from sluice.engine.components.registry_import import PackageReport, RegistryImports
from sluice.platform import Platform
from sluice.runtime.packages import Package, PackageFetcher
from tests.conftest import Api, account_client


class LocalPackages(PackageFetcher):
    """Packages by name, as ``npm pack`` would unpack them (no registry involved)."""

    def __init__(self, packages: dict[str, Package]) -> None:
        self.packages = packages

    async def fetch(self, spec: str, *, offline_first: bool = False) -> Package:
        return self.packages[spec.rsplit("@", 1)[0] if spec.count("@") > 1 else spec]


class VersionedPackages(PackageFetcher):
    """Packages by ``name@version``: each version its own files."""

    def __init__(self, packages: dict[str, Package]) -> None:
        self.packages = packages

    async def fetch(self, spec: str, *, offline_first: bool = False) -> Package:
        return self.packages[spec]


def package(
    app: str, app_code: str, description: str | None = None, version: str = "1.0.0"
) -> Package:
    action = f"""
import app from "../../{app}.app.mjs";
export default {{
  key: "{app}-hello", name: "Hello", version: "0.0.1", type: "action",
  props: {{ {app}: app }},
  async run() {{ return this.{app}.hello(); }},
}};
"""
    meta = {"name": f"@pipedream/{app}", "version": version}
    if description is not None:
        meta["description"] = description
    return Package(
        f"@pipedream/{app}",
        version,
        {
            f"{app}.app.mjs": app_code,
            "actions/hello/hello.mjs": action,
            "package.json": json.dumps(meta),
        },
    )


def keys_app(app: str) -> str:
    return f"""export default {{
  type: "app", app: "{app}", propDefinitions: {{}},
  methods: {{
    hello() {{ const {{ region }} = this.$auth; return `${{this.$auth.api_key}}@${{region}}`; }},
  }},
}};"""


async def import_(
    platform: Platform, fetcher: PackageFetcher, admin_id: str, app: str, version: str = "1.0.0"
) -> PackageReport:
    imports = RegistryImports(platform.db, platform.components, fetcher, platform.catalog)
    report = await imports.import_package(admin_id, f"@pipedream/{app}@{version}")
    assert report.error is None and report.count("failed") == 0, report
    return report


async def test_an_imported_packages_app_joins_the_catalog_once(
    platform: Platform, api: Api
) -> None:
    app = f"crm_{secrets.token_hex(3)}"
    fetcher = LocalPackages(
        {f"@pipedream/{app}": package(app, keys_app(app), "Pipedream Acme CRM Components")}
    )
    async with account_client(platform, f"ops-{app}", is_admin=True) as admin:
        report = await import_(platform, fetcher, admin.account_id, app)
        assert report.app is not None and report.app.status == "added", report.app
        found = (await api.client.get(f"/v1/apps/{app}")).json()["data"]
        assert found["name_slug"] == app and found["name"] == "Acme CRM"
        assert found["auth_type"] == "keys" and found["managed_auth"] is False
        assert found["imported_from"] == f"@pipedream/{app}@1.0.0"
        assert found["builtin"] is False and found["connectable"] is True
        fields = json.loads(found["custom_fields_json"])
        assert [(f["name"], f["optional"]) for f in fields] == [("region", True), ("api_key", True)]
        listed = (await api.client.get("/v1/apps", params={"q": app})).json()["data"]
        assert [a["name_slug"] for a in listed] == [app]

        # Again: the components and the app are there already; nothing changes.
        again = await import_(platform, fetcher, admin.account_id, app)
        assert again.app is not None and again.app.status == "kept"
        assert again.app.reason == f"imported before, from @pipedream/{app}@1.0.0"
        assert (await api.client.get(f"/v1/apps/{app}")).json()["data"] == found

        # No managed auth: an account takes its credentials as given, as before the import, and
        # the component reads them.
        account = await api.client.post(
            "/v1/accounts",
            json={"app": app, "credentials": {"api_key": "k1", "region": "eu", "extra": "x"}},
        )
        assert account.status_code == 200, account.text
        ran = await api.client.post(
            "/v1/actions/run",
            json={
                "component_key": f"{app}-hello",
                "configured_props": {app: {"authProvisionId": account.json()["data"]["id"]}},
            },
        )
        assert ran.status_code == 200 and ran.json()["data"]["ret"] == "k1@eu", ran.text

        # An operator who registers it makes it theirs: managed, no longer an import's.
        unknown = await admin.client.put(f"/v1/apps/{app}", json={"name": "CRM"})
        assert unknown.status_code == 200, unknown.text
        mine = unknown.json()["data"]
        assert mine["managed_auth"] is True and mine["imported_from"] is None
        assert mine["id"] == found["id"]
        third = await import_(platform, fetcher, admin.account_id, app)
        assert third.app is not None and third.app.reason == "registered by an operator"
        assert (await api.client.get(f"/v1/apps/{app}")).json()["data"] == mine


async def test_a_newer_version_of_its_package_updates_an_imported_app(
    platform: Platform, api: Api
) -> None:
    app = f"shop_{secrets.token_hex(3)}"
    token_app = f"""export default {{ type: "app", app: "{app}",
      methods: {{ hello() {{ return this.$auth.token; }} }} }};"""
    fetcher = VersionedPackages(
        {
            f"@pipedream/{app}@1.0.0": package(app, keys_app(app), "Pipedream Shop Components"),
            f"@pipedream/{app}@1.10.0": package(
                app, token_app, "Pipedream Shop Plus Components", version="1.10.0"
            ),
            f"@pipedream/{app}@1.9.0": package(app, keys_app(app), version="1.9.0"),
        }
    )
    async with account_client(platform, f"ops-{app}", is_admin=True) as admin:
        first = await import_(platform, fetcher, admin.account_id, app)
        assert first.app is not None and first.app.status == "added"
        before = (await api.client.get(f"/v1/apps/{app}")).json()["data"]

        newer = await import_(platform, fetcher, admin.account_id, app, "1.10.0")
        assert newer.app is not None
        assert (newer.app.status, newer.app.reason) == (
            "updated",
            f"replaces the app imported from @pipedream/{app}@1.0.0",
        )
        after = (await api.client.get(f"/v1/apps/{app}")).json()["data"]
        assert after["id"] == before["id"] and after["name"] == "Shop Plus"
        assert after["imported_from"] == f"@pipedream/{app}@1.10.0"
        assert [f["name"] for f in json.loads(after["custom_fields_json"])] == ["token"]

        # An older version than the one imported (1.9.0 < 1.10.0 in semver, not as text).
        older = await import_(platform, fetcher, admin.account_id, app, "1.9.0")
        assert older.app is not None
        assert (older.app.status, older.app.reason) == (
            "kept",
            f"imported before, from @pipedream/{app}@1.10.0",
        )
        assert (await api.client.get(f"/v1/apps/{app}")).json()["data"] == after


async def test_an_operators_app_and_a_builtin_are_never_overwritten(
    platform: Platform, api: Api
) -> None:
    app = f"desk_{secrets.token_hex(3)}"
    oauth_app = f"""export default {{ type: "app", app: "{app}",
      methods: {{ hello() {{ return this.$auth.oauth_access_token; }} }} }};"""
    fetcher = LocalPackages(
        {
            f"@pipedream/{app}": package(app, oauth_app),
            "@pipedream/github": package("github", keys_app("github")),
        }
    )
    async with account_client(platform, f"ops-{app}", is_admin=True) as admin:
        body = {
            "name_slug": app,
            "name": "Help Desk",
            "auth_type": "keys",
            "custom_fields": [{"name": "token", "secret": True}],
        }
        created = await admin.client.post("/v1/apps", json=body)
        assert created.status_code == 200, created.text
        report = await import_(platform, fetcher, admin.account_id, app)
        assert report.app is not None and report.app.auth_type == "oauth"
        assert (report.app.status, report.app.reason) == ("kept", "registered by an operator")
        assert (await api.client.get(f"/v1/apps/{app}")).json()["data"] == created.json()["data"]

        before = (await api.client.get("/v1/apps/github")).json()["data"]
        github = await import_(platform, fetcher, admin.account_id, "github")
        assert github.app is not None and github.app.reason == "built in"
        assert (await api.client.get("/v1/apps/github")).json()["data"] == before


async def test_oauth_and_unknown_auth_are_marked_unmanaged(platform: Platform, api: Api) -> None:
    oauth, opaque = f"mail_{secrets.token_hex(3)}", f"blob_{secrets.token_hex(3)}"
    fetcher = LocalPackages(
        {
            f"@pipedream/{oauth}": package(
                oauth,
                f'export default {{ type: "app", app: "{oauth}", methods: '
                "{ hello() { return this.$auth.oauth_access_token; } } };",
            ),
            f"@pipedream/{opaque}": package(
                opaque,
                f'export default {{ type: "app", app: "{opaque}", methods: '
                "{ hello() { return Object.keys(this.$auth).length; } } };",
            ),
        }
    )
    async with account_client(platform, f"ops-{oauth}", is_admin=True) as admin:
        await import_(platform, fetcher, admin.account_id, oauth)
        await import_(platform, fetcher, admin.account_id, opaque)
        mail = (await api.client.get(f"/v1/apps/{oauth}")).json()["data"]
        # OAuth, read from its code; no endpoints known: nobody connects through Sluice until
        # an operator registers them, and pasted tokens are taken as given.
        assert (mail["auth_type"], mail["managed_auth"], mail["connectable"]) == (
            "oauth",
            False,
            False,
        )
        assert "oauth" not in mail and mail["name"] == " ".join(
            w.capitalize() for w in oauth.split("_")
        )
        blob = (await api.client.get(f"/v1/apps/{opaque}")).json()["data"]
        assert (blob["auth_type"], blob["managed_auth"]) == ("unknown", False)
        # An operator must say what it is: "unknown" is not an auth type they can keep.
        kept = await admin.client.put(f"/v1/apps/{opaque}", json={"name": "Blob"})
        assert kept.status_code == 400 and kept.json()["field"] == "auth_type"


class GatedPackages(VersionedPackages):
    """Versioned packages whose first ``together`` fetches each wait until all of them have
    started: an importer that fetches one package at a time never gets past the first."""

    def __init__(self, packages: dict[str, Package], together: int) -> None:
        super().__init__(packages)
        self.started: list[str] = []
        self.together = together
        self.all_started = asyncio.Event()

    async def fetch(self, spec: str, *, offline_first: bool = False) -> Package:
        self.started.append(spec)
        if len(self.started) == self.together:
            self.all_started.set()
        if len(self.started) <= self.together:
            await asyncio.wait_for(self.all_started.wait(), timeout=20)
        return await super().fetch(spec)


async def test_packages_are_imported_at_once_and_one_packages_versions_in_order(
    platform: Platform,
) -> None:
    a, b, c = (f"{n}_{secrets.token_hex(3)}" for n in ("ant", "bee", "cat"))
    packages = {
        f"@pipedream/{app}@{version}": package(app, keys_app(app), version=version)
        for app in (a, b, c)
        for version in ("1.0.0", "1.1.0")
    }
    specs = [f"@pipedream/{a}@1.0.0", f"@pipedream/{b}@1.0.0", f"@pipedream/{a}@1.1.0"]
    specs.append(f"@pipedream/{c}@1.0.0")
    fetcher = GatedPackages(packages, together=3)
    imports = RegistryImports(platform.db, platform.components, fetcher, platform.catalog)
    async with account_client(platform, f"ops-{a}", is_admin=True) as admin:
        reports = await imports.import_packages(admin.account_id, specs)
    # Three packages fetched at once; a's second version only after its first was imported.
    assert set(fetcher.started[:3]) == {specs[0], specs[1], specs[3]}, fetcher.started
    assert fetcher.started[3] == specs[2]
    assert [r.spec for r in reports] == specs
    assert [r.components[0].status for r in reports] == ["loaded", "loaded", "skipped", "loaded"]
    assert reports[2].components[0].reason == f"{a}-hello 0.0.1 is already in the registry"
    assert reports[2].app is not None and reports[2].app.status == "updated"
