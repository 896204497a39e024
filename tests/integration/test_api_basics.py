"""Auth, /users/me, the one error shape, and one account never seeing another's resources."""

from __future__ import annotations

import httpx

from tests.conftest import Api

SOURCE = """
export default {
  name: "Emitter",
  version: "0.0.1",
  props: { db: "$.service.db" },
  async run(event) { this.$emit(event, { summary: "hi" }); },
};
"""


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["error"], str) and body["error"]
    return body


async def test_missing_and_wrong_keys_get_401(api: Api) -> None:
    client = api.client
    for headers in (
        {"Authorization": ""},
        {"Authorization": "Bearer slk_nope_nope"},
        {"Authorization": "Basic abc"},
        {"Authorization": f"Bearer {api.api_key}x"},
    ):
        response = await client.get("/v1/users/me", headers=headers)
        body = assert_error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in body["error"] or "invalid" in body["error"]


async def test_every_v1_route_requires_a_key(api: Api) -> None:
    anonymous = {"Authorization": ""}
    for method, path in [
        ("GET", "/v1/users/me"),
        ("POST", "/v1/components"),
        ("GET", "/v1/components/sc_x"),
        ("POST", "/v1/sources"),
        ("GET", "/v1/sources/dc_x"),
        ("DELETE", "/v1/sources/dc_x"),
        ("POST", "/v1/sources/dc_x/run"),
        ("GET", "/v1/sources/dc_x/event_summaries"),
        ("GET", "/v1/sources/dc_x/logs"),
        ("POST", "/v1/accounts"),
        ("GET", "/v1/accounts"),
        ("POST", "/v1/actions/run"),
    ]:
        response = await api.client.request(method, path, headers=anonymous, json={})
        assert_error(response, 401, "unauthorized")


async def test_users_me_returns_the_account(api: Api) -> None:
    response = await api.client.get("/v1/users/me")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["id"] == api.account_id and data["id"].startswith("u_")
    assert data["email"].startswith("u-user-") and data["email"].endswith("@example.com")
    assert "api_key" not in data


async def test_error_shape_for_routing_and_parsing_failures(api: Api) -> None:
    assert_error(await api.client.get("/v1/nope"), 404, "not_found")
    assert_error(await api.client.get("/nothing/here"), 404, "not_found")
    body = assert_error(await api.client.patch("/v1/users/me"), 405, "method_not_allowed")
    assert "PATCH" in body["error"]
    # Every method of the path, though each has a route of its own.
    response = await api.client.patch("/v1/sources/dc_x")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET, HEAD, PUT"
    body = assert_error(
        await api.client.post(
            "/v1/components", content=b"{not json", headers={"content-type": "application/json"}
        ),
        400,
        "invalid_json",
    )
    assert "JSON" in body["error"]
    body = assert_error(
        await api.client.post("/v1/components", json={"component_code": 5}), 400, "invalid_request"
    )
    assert body["field"] == "component_code"
    body = assert_error(
        await api.client.post("/v1/components", json={"component_cod": "x"}), 400, "invalid_request"
    )
    assert body["field"] == "component_cod"
    assert_error(await api.client.post("/v1/components", json=[1, 2]), 400, "invalid_request")
    body = assert_error(await api.client.post("/v1/components", json={}), 400, "invalid_request")
    assert "component_code" in body["error"]
    body = assert_error(
        await api.client.get("/v1/sources/dc_x/event_summaries", params={"limit": "many"}),
        400,
        "invalid_request",
    )
    assert body["field"] == "limit"


async def test_accounts_cannot_see_each_others_resources(api: Api, other_api: Api) -> None:
    saved = await api.client.post("/v1/components", json={"component_code": SOURCE})
    assert saved.status_code == 200, saved.text
    component_id = saved.json()["data"]["id"]
    deployed = await api.client.post("/v1/sources", json={"component_id": component_id})
    assert deployed.status_code == 200, deployed.text
    source_id = deployed.json()["data"]["id"]
    connected = await api.client.post(
        "/v1/accounts", json={"app": "demo", "credentials": {"k": "v"}}
    )
    account_id = connected.json()["data"]["id"]

    other = other_api.client
    for method, path, body in [
        ("GET", f"/v1/components/{component_id}", None),
        ("GET", f"/v1/sources/{source_id}", None),
        ("POST", f"/v1/sources/{source_id}/run", {"event": {}}),
        ("GET", f"/v1/sources/{source_id}/event_summaries", None),
        ("GET", f"/v1/sources/{source_id}/logs", None),
        ("DELETE", f"/v1/sources/{source_id}", None),
        ("GET", f"/v1/accounts/{account_id}", None),
        ("DELETE", f"/v1/accounts/{account_id}", None),
    ]:
        response = await other.request(method, path, json=body)
        assert_error(response, 404, "not_found")
    response = await other.post("/v1/sources", json={"component_id": component_id})
    assert_error(response, 404, "not_found")
    response = await other.post("/v1/actions/run", json={"component_id": component_id})
    assert_error(response, 404, "not_found")
    assert (await other.get("/v1/accounts")).json()["data"] == []
    # …and the owner still has everything.
    assert (await api.client.get(f"/v1/sources/{source_id}")).status_code == 200
    assert (await api.client.get(f"/v1/accounts/{account_id}")).status_code == 200


async def test_openapi_is_served(api: Api) -> None:
    response = await api.client.get("/openapi.json")
    assert response.status_code == 200
    assert "/v1/sources" in response.json()["paths"]
    # Every route is in a resource's group (/docs shows no "default" group).
    untagged = [
        f"{method.upper()} {path}"
        for path, operations in response.json()["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict) and "responses" in operation and not operation.get("tags")
    ]
    assert untagged == []


async def test_a_missing_body_says_so(api: Api) -> None:
    body = assert_error(await api.client.put("/v1/users/me"), 400, "invalid_request")
    assert body["error"] == "a JSON body is required"


async def test_pipedreams_common_parameters(api: Api) -> None:
    """``include``/``exclude`` pick an answer's fields; ``org_id``/``workspace_id`` in a POST
    body are accepted (an account is its own workspace) and ignored."""
    code = 'export default { name: "Fields", version: "1", async run() {} };'
    made = await api.client.post(
        "/v1/sources", json={"component_code": code, "org_id": "o_abc", "workspace_id": "o_abc"}
    )
    assert made.status_code == 200, made.text
    source_id = made.json()["data"]["id"]
    one = await api.client.get(f"/v1/sources/{source_id}", params={"include": "id,name"})
    assert one.status_code == 200 and set(one.json()["data"]) == {"id", "name"}
    listed = await api.client.get("/v1/users/me/sources", params={"exclude": "configured_props"})
    items = listed.json()["data"]
    assert items and all("configured_props" not in i and "id" in i for i in items)
    assert "page_info" in listed.json()  # only data's objects are picked from
    missing = await api.client.get("/v1/sources/dc_nothere", params={"include": "id"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    unknown = await api.client.post("/v1/sources", json={"component_code": code, "orgid": "x"})
    assert unknown.status_code == 400  # a typo is still an error
