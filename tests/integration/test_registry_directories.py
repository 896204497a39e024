"""Importing app directories of Pipedream's monorepo (``components/<app>/`` with its
``package.json``) into the registry over ``POST /v1/registry/imports {"directories": …}``, on
both dialects: the same report and catalog entry as the app's npm package gives, real Node."""

from __future__ import annotations

import secrets

from sluice.platform import Platform
from tests import monorepo
from tests.conftest import Api, account_client
from tests.integration.test_api_basics import assert_error


async def test_an_app_directory_imports_as_its_package_does(platform: Platform, api: Api) -> None:
    app = f"dirapp_{secrets.token_hex(3)}"
    files = monorepo.app_files(app)
    async with account_client(platform, "dir-importer", is_admin=True) as admin:
        done = await admin.client.post("/v1/registry/imports", json={"directories": [files]})
        assert done.status_code == 200, done.text
        (report,) = done.json()["data"]["packages"]
        assert report["spec"] == f"@pipedream/{app}@0.1.0 (directory)", report
        assert (report["name"], report["version"]) == (f"@pipedream/{app}", "0.1.0")
        assert report["counts"] == {"found": 2, "loaded": 2, "skipped": 0, "failed": 0}, report
        assert report["app"]["auth_type"] == "oauth" and report["app"]["status"] == "added"
        kinds = {m["path"]: m["kind"] for m in report["not_components"]}
        assert kinds[f"{app}.app.mjs"] == "app file", kinds
        again = await admin.client.post("/v1/registry/imports", json={"directories": [files]})
        assert again.json()["data"]["packages"][0]["counts"]["skipped"] == 2

        newer = monorepo.app_files(app, "0.2.0")
        newer["actions/say-hi/say-hi.mjs"] = newer["actions/say-hi/say-hi.mjs"].replace(
            '"0.0.1"', '"0.0.2"'
        )
        both = await admin.client.post(
            "/v1/registry/imports", json={"directories": [newer], "packages": []}
        )
        counts = both.json()["data"]["packages"][0]["counts"]
        assert counts == {"found": 2, "loaded": 1, "skipped": 1, "failed": 0}, both.text

        for body, field in (
            ({"directories": [{"x.mjs": ""}]}, "directories"),
            ({"directories": [{"package.json": '{"name": "x"}'}]}, "directories"),
            ({}, "packages"),
        ):
            refused = assert_error(
                await admin.client.post("/v1/registry/imports", json=body), 400, "invalid_request"
            )
            assert refused["field"] == field, refused
    assert_error(
        await api.client.post("/v1/registry/imports", json={"directories": [files]}),
        403,
        "forbidden",
    )
    # Deployed and run from the registry by key, as an npm package's components are.
    ran = await api.client.post(
        "/v1/actions/run",
        json={
            "component_key": f"{app}-say-hi",
            "configured_props": {app: {"authProvisionId": await _account(api, app)}, "who": "x"},
        },
    )
    assert ran.status_code == 200, ran.text
    assert ran.json()["data"]["ret"] == {"text": "hi x", "dep": "none"}, ran.text
    source = await api.client.post("/v1/sources", json={"component_key": f"{app}-new-thing"})
    assert source.status_code == 200, source.text


async def _account(api: Api, app: str) -> str:
    made = await api.client.post(
        "/v1/accounts", json={"app": app, "credentials": {"oauth_access_token": "t"}}
    )
    assert made.status_code == 200, made.text
    account_id: str = made.json()["data"]["id"]
    return account_id
