"""The builder's Test in the engine: a draft workflow (checked, not stored) run up to a step by
``Executor.test``, returned and stored nowhere."""

from __future__ import annotations

from sluice.engine.workflow_input import WorkflowInput
from tests.conftest import Api

STEPS = [
    {
        "name": "first",
        "code": "export default defineComponent({ async run({ steps, $ }) {\n"
        "  console.log('got', steps.trigger.event.n);\n"
        "  $.export('double', steps.trigger.event.n * 2);\n"
        "  return 'one'; } });\n",
    },
    {
        "name": "second",
        "code": "export default defineComponent({ async run() { throw new Error('no'); } });",
    },
]


async def test_a_draft_runs_up_to_a_step_and_is_not_stored(api: Api) -> None:
    platform = api.platform
    body = WorkflowInput(name="draft", trigger={"type": "manual"}, steps=STEPS[:1])
    draft = await platform.workflows.draft(api.account_id, body)
    run = await platform.executor.test(draft, {"n": 21})
    assert run.status == "success" and run.context["test"] is True
    (step,) = run.steps
    assert step["exports"] == {"double": 42} and step["return_value"] == "one"
    assert [line["msg"] for line in step["logs"]] == ["got 21"]
    # Not a workflow of the account, and no run stored.
    listed = await api.client.get("/v1/users/me/workflows")
    assert draft.id not in listed.text
    _, total = await platform.runs.page(draft.id, limit=10, before=None, after=None)
    assert total == 0

    failing = await platform.workflows.draft(api.account_id, WorkflowInput(steps=STEPS))
    run = await platform.executor.test(failing, {"n": 1})
    assert run.status == "error" and [s["status"] for s in run.steps] == ["success", "error"]
    assert run.steps[1]["error"]["message"] == "no"
    # A failed test reaches no $errors list.
    errors = await api.client.get(f"/v1/workflows/{failing.id}/$errors/event_summaries")
    assert errors.status_code == 404 or errors.json()["data"] == []
