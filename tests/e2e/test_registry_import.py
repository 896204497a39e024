"""Importing published @pipedream/* packages into the public registry, unmodified.

Real npm (``npm pack`` from the registry; tarballs cached in ``.test-cache/npm-store``), real
Node for every component, the real API. The goal: every published component of these
packages loads; a component that cannot is reported with its reason, and listed here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.api.app import serving
from sluice.domain.apps import BUILTIN_BY_SLUG
from sluice.platform import Platform
from tests.conftest import make_settings

# Importing twelve packages loads 330 components in Node: minutes, past the suite's 120 s.
pytestmark = [pytest.mark.npm, pytest.mark.timeout(1800)]

#: Popular packages of the npm registry this project reaches, pinned so the figures hold.
PACKAGES = {
    "helper_functions": "0.3.13",
    "slack": "0.10.3",
    "notion": "1.0.6",
    "gitlab": "0.5.6",
    "linear_app": "0.8.1",
    "monday": "0.7.0",
    "pipedream": "0.4.2",
    "docusign": "0.2.2",
    "microsoft_outlook": "1.7.5",
    "google_drive": "1.4.1",
    "shopify": "1.0.1",
    "youtube_data_api": "1.0.1",
    "brex": "0.1.1",
}
#: Apps whose app file spreads a common module that reads ``$auth`` (issue 27: they were
#: catalogued ``none``), with the auth type their import gives.
SPREAD_APPS = {"docusign": "oauth", "youtube_data_api": "oauth", "brex": "oauth"}
#: Components that cannot load, with the reason (none so far).
KNOWN_FAILURES: dict[str, str] = {}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    # The spec's rules for users' components: imports get the compatibility rules anyway.
    settings = make_settings(tmp_path_factory.mktemp("import"))
    async with Platform.open(settings, background=False) as opened:
        yield opened


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def admin(platform: Platform) -> AsyncIterator[httpx.AsyncClient]:
    _account, key = await platform.create_account("importer", is_admin=True)
    async with client(platform, key) as c:
        yield c


def client(platform: Platform, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=serving(platform)),
        base_url="http://sluice.test",
        headers={"Authorization": f"Bearer {key}"},
        timeout=1800,
    )


async def import_(admin: httpx.AsyncClient, *specs: str) -> list[dict[str, Any]]:
    response = await admin.post("/v1/registry/imports", json={"packages": list(specs)})
    assert response.status_code == 200, response.text
    packages: list[dict[str, Any]] = response.json()["data"]["packages"]
    return packages


async def test_every_component_of_the_packages_loads(
    platform: Platform, admin: httpx.AsyncClient
) -> None:
    # An older helper_functions first: the newer package then adds one version.
    (older,) = await import_(admin, "@pipedream/helper_functions@0.3.12")
    assert older["counts"]["loaded"] == older["counts"]["found"] == 24, older
    figures = {}
    # One call, as `sluice registry import` makes: the packages are imported three at once.
    reports = await import_(admin, *(f"@pipedream/{a}@{v}" for a, v in PACKAGES.items()))
    assert [r["spec"] for r in reports] == [f"@pipedream/{a}@{v}" for a, v in PACKAGES.items()]
    for (app, version), report in zip(PACKAGES.items(), reports, strict=True):
        assert report.get("error") is None, report
        assert report["name"] == f"@pipedream/{app}" and report["version"] == version
        for item in report["components"]:
            assert item["status"] in ("loaded", "skipped", "failed"), item
            if item["status"] != "loaded":
                assert item["reason"], item
            if item["status"] == "failed":
                assert KNOWN_FAILURES.get(item["path"]) == item["reason"], item
            else:
                assert item["key"] and item["version"] and item["id"].startswith("sc_"), item
        # Modules are recognised and never saved as components.
        kinds = {m["path"]: m["kind"] for m in report["not_components"]}
        assert f"{app}.app.mjs" in kinds and kinds[f"{app}.app.mjs"] == "app file"
        assert not any(path in kinds for path in (i["path"] for i in report["components"]))
        figures[app] = report["counts"]
        # The app file's app joins the catalog, unless the catalog has it (built in).
        assert report["app"]["name_slug"] == app, report["app"]
        assert report["app"]["status"] == ("kept" if app in BUILTIN_BY_SLUG else "added")
        if app in SPREAD_APPS:
            assert report["app"]["auth_type"] == SPREAD_APPS[app], report["app"]
    assert figures["helper_functions"] == {"found": 24, "loaded": 1, "skipped": 23, "failed": 0}
    # Each package's components were read in one realm, ended with its import.
    workers = await platform.pool.stats()
    assert workers and not any(
        k.startswith("inspect:") for w in workers.values() for k in w["keys"]
    ), workers
    newer = await admin.get("/v1/components/registry/helper_functions-convert-currency")
    assert newer.json()["data"]["versions"] == ["0.1.1", "0.2.0"], newer.text
    for app, counts in figures.items():
        if app != "helper_functions":
            assert counts["loaded"] == counts["found"] > 0, (app, counts)
    assert sum(c["found"] for c in figures.values()) >= 300

    # The registry's dependency sets are not the importing admin's: its npm quota is untouched.
    me = (await admin.get("/v1/users/me")).json()["data"]
    assert me["quotas"]["npm_bytes"] == 0, me["quotas"]

    notion = (await admin.get("/v1/apps/notion")).json()["data"]
    assert (notion["name"], notion["auth_type"], notion["managed_auth"]) == (
        "Notion",
        "oauth",
        False,
    )
    assert notion["imported_from"] == "@pipedream/notion@1.0.6" and notion["connectable"] is False
    slack = (await admin.get("/v1/apps/slack")).json()["data"]
    assert slack["builtin"] is True and slack["managed_auth"] is True

    # Importing the same versions again changes nothing.
    (again,) = await import_(admin, "@pipedream/slack@0.10.3")
    assert again["counts"]["skipped"] == again["counts"]["found"] == 43
    assert all("already in the registry" in c["reason"] for c in again["components"])
    (notion_again,) = await import_(admin, "@pipedream/notion@1.0.6")
    assert notion_again["app"]["status"] == "kept"
    assert (await admin.get("/v1/apps/notion")).json()["data"] == notion


async def test_warnings_name_the_waived_rules(admin: httpx.AsyncClient) -> None:
    found = await admin.get("/v1/components/registry/helper_functions-compare-arrays")
    assert found.status_code == 200, found.text
    warnings = found.json()["data"]["warnings"]
    assert any("props.array1: default on a prop that is not optional" in w for w in warnings)
    rss = await admin.get("/v1/components/registry/helper_functions-retrieve-new-rss-stories")
    assert any("$.service.db in an action" in w for w in rss.json()["data"]["warnings"])
    notion = await admin.get("/v1/components/registry/notion-new-database")
    assert any(w.startswith("key: ") for w in notion.json()["data"]["warnings"])


async def test_imported_components_deploy_and_run(
    platform: Platform, admin: httpx.AsyncClient
) -> None:
    _account, key = await platform.create_account("user-of-imports")
    async with client(platform, key) as user:
        refused = await user.post("/v1/registry/imports", json={"packages": ["slack"]})
        assert refused.status_code == 403
        account = await user.post(
            "/v1/accounts", json={"app": "pipedream", "credentials": {"api_key": "k"}}
        )
        app = {"authProvisionId": account.json()["data"]["id"]}
        deployed = await user.post(
            "/v1/sources",
            json={
                "component_key": "pipedream-new-scheduled-tasks",
                "configured_props": {"pipedream": app},
            },
        )
        assert deployed.status_code == 200, deployed.text
        assert deployed.json()["data"]["endpoint_url"]
        helper = await user.post(
            "/v1/accounts", json={"app": "helper_functions", "credentials": {}}
        )
        helpers = {"authProvisionId": helper.json()["data"]["id"]}
        as_json = await run(
            user,
            "helper_functions-convert-object-to-json-string",
            {"helper_functions": helpers, "object": {"a": [1, "b"]}},
        )
        assert as_json["ret"] == '{"a":[1,"b"]}', as_json
        exported = await run(
            user,
            "helper_functions-export-variables",
            {"helperFunctions": helpers, "config": "{not json"},
        )
        # The component checks its own object prop, as on Pipedream.
        assert exported["ok"] is False and exported["error"]["name"] == "ConfigurationError"
        assert "valid object" in exported["error"]["message"]
        # Reload props of a published component whose additionalProps() depends on a value.
        reloaded = await user.post(
            "/v1/components/monday-create-column/props",
            json={"configured_props": {"columnType": "status"}},
        )
        names = [p["name"] for p in reloaded.json()["data"]["dynamicProps"]["configurableProps"]]
        assert "defaults" in names, reloaded.text


async def run(user: httpx.AsyncClient, key: str, props: dict[str, Any]) -> dict[str, Any]:
    response = await user.post(
        "/v1/actions/run", json={"component_key": key, "configured_props": props}
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data
