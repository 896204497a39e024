"""GET /v1/users/me/components: the account's saved components, newest first, paginated."""

from __future__ import annotations

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error


def code(name: str, kind: str = "") -> str:
    return (
        f'export default {{ name: "{name}", key: "k-{name.lower()}", version: "0.0.1", {kind} '
        "async run() {} };"
    )


async def test_pages_newest_first_without_code(api: Api, other_api: Api) -> None:
    ids = []
    for name, kind in (("A", ""), ("B", 'type: "action",'), ("C", "")):
        saved = await api.client.post("/v1/components", json={"component_code": code(name, kind)})
        ids.append(saved.json()["data"]["id"])
    await other_api.client.post("/v1/components", json={"component_code": code("X")})

    first = (await api.client.get("/v1/users/me/components", params={"limit": 2})).json()
    assert first["page_info"]["total_count"] == 3 and first["page_info"]["count"] == 2
    assert all("code" not in c and c["entry_path"] for c in first["data"])
    after = first["page_info"]["end_cursor"]
    rest = (await api.client.get("/v1/users/me/components", params={"after": after})).json()
    listed = [c["id"] for c in first["data"] + rest["data"]]
    assert sorted(listed) == sorted(ids) and len(listed) == 3

    actions = (await api.client.get("/v1/users/me/components", params={"type": "action"})).json()[
        "data"
    ]
    assert [c["id"] for c in actions] == [ids[1]]
    bad = await api.client.get("/v1/users/me/components", params={"after": "bm9wZQ"})
    assert_error(bad, 400, "invalid_request")


async def test_a_republish_in_the_same_second_is_the_newest(api: Api) -> None:
    first = await api.client.post("/v1/components", json={"component_code": code("Same")})
    again = code("Same").replace('"0.0.1"', '"0.0.2"')
    second = await api.client.post("/v1/components", json={"component_code": again})
    newest = (await api.client.get("/v1/components/k-same")).json()["data"]
    assert newest["id"] == second.json()["data"]["id"] != first.json()["data"]["id"]
    listed = (await api.client.get("/v1/users/me/components")).json()["data"]
    assert listed[0]["id"] == newest["id"]
