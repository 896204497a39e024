"""The account's saved components: saving the same code again is the component already
saved; one nothing runs may be deleted, one in use may not."""

from __future__ import annotations

import pytest

from sluice import errors
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

CODE = """export default {
  key: "mine-counter", name: "Counter", version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit(event.body); },
};
"""


async def test_saving_the_same_code_again_adds_nothing(api: Api) -> None:
    first = await api.client.post("/v1/components", json={"component_code": CODE})
    again = await api.client.post("/v1/components", json={"component_code": CODE})
    assert first.status_code == again.status_code == 200, again.text
    assert first.json()["data"]["id"] == again.json()["data"]["id"]
    deployed = await api.client.post("/v1/sources", json={"component_code": CODE})
    assert deployed.json()["data"]["component_id"] == first.json()["data"]["id"]
    changed = await api.client.post(
        "/v1/components", json={"component_code": CODE.replace("0.0.1", "0.0.2")}
    )
    assert changed.json()["data"]["id"] != first.json()["data"]["id"]
    listed = await api.client.get("/v1/users/me/components")
    ids = [c["id"] for c in listed.json()["data"]]
    assert sorted(ids) == sorted({first.json()["data"]["id"], changed.json()["data"]["id"]})


async def test_delete_only_what_nothing_runs(api: Api, other_api: Api) -> None:
    """My components' Delete (the web UI's; the API has no DELETE: its path would shadow
    /v1/components/search and /registry)."""
    components = api.platform.components
    used = (await api.client.post("/v1/sources", json={"component_code": CODE})).json()["data"]
    component_id = used["component_id"]
    with pytest.raises(errors.Conflict) as refused:
        await components.delete(api.account_id, component_id)
    assert used["id"] in refused.value.message
    users = await components.users(api.account_id)
    assert [u.id for u in users[component_id]] == [used["id"]]
    # Another account cannot delete it, nor anyone a registry component.
    with pytest.raises(errors.NotFound):
        await components.delete(other_api.account_id, component_id)
    registry = (await api.client.get("/v1/components/registry/http-new-requests")).json()["data"]
    with pytest.raises(errors.NotFound):
        await components.delete(api.account_id, registry["id"])
    assert (await api.client.delete(f"/v1/sources/{used['id']}")).status_code == 200
    await components.delete(api.account_id, component_id)
    assert_error(await api.client.get(f"/v1/components/{component_id}"), 404, "not_found")
