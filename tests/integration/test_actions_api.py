"""POST /v1/actions/run: exports, $summary, return values, $.respond, $.flow.exit."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.integration.test_api_basics import assert_error

ACTION = """
export default {
  name: "Echo", version: "0.0.1", type: "action",
  props: { mode: { type: "string" }, n: { type: "integer", optional: true, default: 2 } },
  async run({ $, steps }) {
    $.export("doubled", this.n * 2);
    $.export("$summary", `mode ${this.mode}`);
    if (this.mode === "respond") {
      await $.respond({ status: "201", headers: { "x-a": "1" }, body: { hello: steps.trigger.event.name } });
    }
    if (this.mode === "exit-return") return $.flow.exit("done early");
    if (this.mode === "exit-bare") { $.flow.exit("bare exit"); $.export("after", true); }
    return { steps };
  },
};
"""


async def run(api: Api, mode: str, **extra: object) -> dict:
    response = await api.client.post(
        "/v1/actions/run",
        json={"component_code": ACTION, "configured_props": {"mode": mode}, **extra},
    )
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_exports_summary_and_return_value(api: Api) -> None:
    data = await run(api, "plain", steps={"trigger": {"event": {"name": "x"}}})
    assert data["ok"] and data["exports"] == {"doubled": 4, "$summary": "mode plain"}
    assert data["summary"] == "mode plain"
    assert data["ret"] == {"steps": {"trigger": {"event": {"name": "x"}}}}
    assert data["flow_exit"] is None


async def test_respond_is_reported(api: Api) -> None:
    data = await run(api, "respond", steps={"trigger": {"event": {"name": "Luke"}}})
    assert data["respond"]["status"] == 201
    assert data["respond"]["headers"] == {"x-a": "1"}
    assert data["respond"]["body"] == {"hello": "Luke"}


@pytest.mark.parametrize(
    ("mode", "reason"), [("exit-return", "done early"), ("exit-bare", "bare exit")]
)
async def test_flow_exit_ends_the_run_with_or_without_return(
    api: Api, mode: str, reason: str
) -> None:
    data = await run(api, mode)
    assert data["ok"] is True
    assert data["flow_exit"]["reason"] == reason
    assert "after" not in data["exports"]
    assert data["ret"] is None


async def test_sources_cannot_run_as_actions_and_actions_cannot_deploy(api: Api) -> None:
    source = 'export default { name: "S", version: "1", async run() {} };'
    body = assert_error(
        await api.client.post("/v1/actions/run", json={"component_code": source}),
        400,
        "invalid_request",
    )
    assert "source" in body["error"]
    body = assert_error(
        await api.client.post("/v1/sources", json={"component_code": ACTION}),
        400,
        "invalid_request",
    )
    assert "action" in body["error"]
