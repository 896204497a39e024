"""Source lifecycle over REST: list with cursors, update (deactivate → replace → activate),
toggling active, renaming, and nothing changed by a bad update."""

from __future__ import annotations

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error


def versioned(tag: str) -> str:
    return f"""
export default {{
  name: "Lifecycle", version: "1",
  props: {{ db: "$.service.db", label: {{ type: "string" }},
            token: {{ type: "string", secret: true, optional: true }} }},
  hooks: {{
    async deploy() {{ this.db.set("log", [...(this.db.get("log") || []), "deploy:{tag}"]); }},
    async activate() {{ this.db.set("log", [...(this.db.get("log") || []), "activate:{tag}:" + this.label]); }},
    async deactivate() {{ this.db.set("log", [...(this.db.get("log") || []), "deactivate:{tag}"]); }},
  }},
  async run() {{ return {{ log: this.db.get("log"), label: this.label, token: this.token ?? null, v: "{tag}" }}; }},
}};
"""


async def state(api: Api, source_id: str) -> dict:
    response = await api.client.post(f"/v1/sources/{source_id}/run", json={})
    assert response.status_code == 200, response.text
    return response.json()["data"]["value"]


async def test_update_code_and_props_keeps_the_id_and_runs_the_hooks_in_order(api: Api) -> None:
    created = await api.client.post(
        "/v1/sources",
        json={"component_code": versioned("v1"), "configured_props": {"label": "a", "token": "t0"}},
    )
    source_id = created.json()["data"]["id"]
    updated = await api.client.put(
        f"/v1/sources/{source_id}",
        json={"component_code": versioned("v2"), "configured_props": {"label": "b"}},
    )
    assert updated.status_code == 200, updated.text
    data = updated.json()["data"]
    assert data["id"] == source_id and data["active"] is True
    assert data["component_id"] != created.json()["data"]["component_id"]
    value = await state(api, source_id)
    # db state survives the update; the secret left out kept its value.
    assert value == {
        "log": ["deploy:v1", "activate:v1:a", "deactivate:v1", "activate:v2:b"],
        "label": "b",
        "token": "t0",
        "v": "v2",
    }


async def test_props_only_update_and_toggling_active(api: Api) -> None:
    created = await api.client.post(
        "/v1/sources", json={"component_code": versioned("v1"), "configured_props": {"label": "a"}}
    )
    source_id = created.json()["data"]["id"]
    await api.client.put(f"/v1/sources/{source_id}", json={"configured_props": {"label": "c"}})
    off = await api.client.put(f"/v1/sources/{source_id}", json={"active": False})
    assert off.json()["data"]["active"] is False
    on = await api.client.put(f"/v1/sources/{source_id}", json={"active": True})
    assert on.json()["data"]["active"] is True
    assert (await state(api, source_id))["log"] == [
        "deploy:v1",
        "activate:v1:a",
        "deactivate:v1",
        "activate:v1:c",
        "deactivate:v1",
        "activate:v1:c",
    ]


async def test_a_bad_update_changes_nothing(api: Api) -> None:
    created = await api.client.post(
        "/v1/sources", json={"component_code": versioned("v1"), "configured_props": {"label": "a"}}
    )
    source_id = created.json()["data"]["id"]
    body = assert_error(
        await api.client.put(
            f"/v1/sources/{source_id}", json={"configured_props": {"label": 5.5, "nope": 1}}
        ),
        400,
        "invalid_props",
    )
    assert body["field"] == "configured_props.nope"
    action = 'export default { name: "A", version: "1", type: "action", async run() {} };'
    assert_error(
        await api.client.put(f"/v1/sources/{source_id}", json={"component_code": action}),
        400,
        "invalid_request",
    )
    assert (await state(api, source_id))["log"] == ["deploy:v1", "activate:v1:a"]
    assert_error(
        await api.client.put("/v1/sources/dc_missing", json={"active": False}), 404, "not_found"
    )


async def test_rename_gives_a_unique_slug(api: Api) -> None:
    first = (
        await api.client.post(
            "/v1/sources",
            json={
                "component_code": versioned("v1"),
                "name": "Alpha",
                "configured_props": {"label": "a"},
            },
        )
    ).json()["data"]
    second = (
        await api.client.post(
            "/v1/sources",
            json={
                "component_code": versioned("v1"),
                "name": "Beta",
                "configured_props": {"label": "a"},
            },
        )
    ).json()["data"]
    renamed = (await api.client.put(f"/v1/sources/{second['id']}", json={"name": "Alpha"})).json()[
        "data"
    ]
    assert (renamed["name"], renamed["name_slug"]) == ("Alpha", "alpha-2")
    same = (await api.client.put(f"/v1/sources/{first['id']}", json={"name": "Alpha"})).json()[
        "data"
    ]
    assert same["name_slug"] == "alpha"


async def test_list_pages_with_cursors(api: Api) -> None:
    code = 'export default { name: "Listed", version: "1", async run() {} };'
    made = {
        (await api.client.post("/v1/sources", json={"component_code": code})).json()["data"]["id"]
        for _ in range(5)
    }
    full = (await api.client.get("/v1/users/me/sources", params={"limit": 100})).json()
    assert full["page_info"]["total_count"] == 5 == full["page_info"]["count"]
    order = [d["id"] for d in full["data"]]
    assert set(order) == made
    default = (await api.client.get("/v1/users/me/sources/")).json()
    assert default["page_info"]["count"] == 5  # default limit 10
    pages, cursor = [], None
    while True:
        params: dict[str, object] = {"limit": 2}
        if cursor:
            params["after"] = cursor
        page = (await api.client.get("/v1/users/me/sources", params=params)).json()
        if not page["data"]:
            break
        pages.append([d["id"] for d in page["data"]])
        cursor = page["page_info"]["end_cursor"]
    assert [i for p in pages for i in p] == order and [len(p) for p in pages] == [2, 2, 1]
    back = (
        await api.client.get(
            "/v1/users/me/sources", params={"limit": 2, "before": page_start(pages[2][0])}
        )
    ).json()
    assert [d["id"] for d in back["data"]] == order[2:4]
    body = assert_error(
        await api.client.get("/v1/users/me/sources", params={"after": "!!"}), 400, "invalid_request"
    )
    assert body["field"] == "after"
    assert_error(
        await api.client.get("/v1/users/me/sources", params={"limit": 101}), 400, "invalid_request"
    )


def page_start(source_id: str) -> str:
    from sluice import ids

    return ids.encode_cursor(source_id)


async def test_updates_keep_the_timer_in_step(api: Api) -> None:
    import sqlalchemy as sa

    from sluice.storage.tables import timers

    async def timer_row(source_id: str):  # type: ignore[no-untyped-def]
        async with api.platform.db.connect() as conn:
            return (
                await conn.execute(sa.select(timers).where(timers.c.deployment_id == source_id))
            ).first()

    code = """
export default { name: "Ticking", version: "1",
  props: { timer: { type: "$.interface.timer", default: { intervalSeconds: 60 } } },
  async run(event) { this.$emit(event); } };
"""
    source_id = (await api.client.post("/v1/sources", json={"component_code": code})).json()[
        "data"
    ]["id"]
    assert (await timer_row(source_id)).interval_seconds == 60
    await api.client.put(
        f"/v1/sources/{source_id}", json={"configured_props": {"timer": {"intervalSeconds": 120}}}
    )
    assert (await timer_row(source_id)).interval_seconds == 120
    await api.client.put(f"/v1/sources/{source_id}", json={"active": False})
    assert await timer_row(source_id) is None
    await api.client.put(f"/v1/sources/{source_id}", json={"active": True})
    assert (await timer_row(source_id)).interval_seconds == 120
    body = assert_error(
        await api.client.put(
            f"/v1/sources/{source_id}", json={"configured_props": {"timer": {"intervalSeconds": 5}}}
        ),
        400,
        "invalid_props",
    )
    assert body["field"].startswith("configured_props.timer")
