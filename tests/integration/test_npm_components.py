"""npm packages without a manifest, through the API: pins honoured, platform per version."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

pytestmark = pytest.mark.npm


async def test_platform_resolves_at_the_version_each_component_asks_for(api: Api) -> None:
    old = """
import * as platform from "@pipedream/platform@1.6.8";
export default { name: "Old", version: "1", type: "action",
  async run() { return { file: typeof platform.getFileStream, axios: typeof platform.axios,
                         needle: platform.END_NEEDLE }; } };
"""
    new = old.replace("@pipedream/platform@1.6.8", "@pipedream/platform@^3")
    results = []
    for code in (old, new):
        response = await api.client.post("/v1/actions/run", json={"component_code": code})
        assert response.status_code == 200, response.text
        results.append(response.json()["data"])
    assert results[0]["ret"] == {"file": "undefined", "axios": "function", "needle": "__pd_end"}
    assert results[1]["ret"] == {"file": "function", "axios": "function", "needle": "__pd_end"}


async def test_two_pins_of_one_package_in_one_component(api: Api) -> None:
    code = """
import isOdd3 from "is-odd@3.0.1";
import isOdd2 from "is-odd@^2";
export default { name: "Pins", version: "1", type: "action",
  async run() { return [isOdd3(3), isOdd2(3)]; } };
"""
    saved = await api.client.post("/v1/components", json={"component_code": code})
    assert saved.status_code == 200, saved.text
    deps = saved.json()["data"]["dependencies"]
    assert deps["is-odd"] in ("3.0.1", "^2") and len(deps) == 2
    response = await api.client.post(
        "/v1/actions/run", json={"component_id": saved.json()["data"]["id"]}
    )
    assert response.json()["data"]["ret"] == [True, True]


async def test_a_package_that_does_not_exist_is_named(api: Api) -> None:
    code = (
        'import x from "sluice-no-such-package-zz9";\n'
        'export default { name: "X", version: "1", async run() {} };'
    )
    body = assert_error(
        await api.client.post("/v1/components", json={"component_code": code}),
        400,
        "dependency_install_failed",
    )
    assert "sluice-no-such-package-zz9" in body["error"]
