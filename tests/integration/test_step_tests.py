"""The builder's Test in the engine: a draft workflow (checked, not stored) run up to a step by
``Executor.test``, returned and stored nowhere."""

from __future__ import annotations

from sluice.engine.components.workflow_input import WorkflowInput
from tests.conftest import Api
from tests.integration.test_workflows import step

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


WRITES = step(
    "writes",
    'props: { store: { type: "data_store" } }, async run() { const s = this.store; '
    'const before = await s.get("a"); await s.set("b", { n: 2 }); await s.delete("a"); '
    'await s.set("t", 1, { ttl: 60 }); '
    'return { before, a: (await s.get("a")) ?? null, has: await s.has("b"), '
    "entries: await s.entries() }; }",
    {"store": "scratch"},
)
READS = step(
    "reads",
    'props: { store: { type: "data_store" } }, async run() { const s = this.store; '
    "const seen = await s.keys(); await s.clear(); "
    "return { seen, after: await s.keys() }; }",
    {"store": "scratch"},
)


async def test_data_store_writes_in_a_test_go_to_a_scratch_copy(api: Api) -> None:
    made = await api.client.post("/v1/data_stores", json={"name": "scratch"})
    assert made.status_code == 200, made.text
    put = await api.client.put("/v1/data_stores/scratch/records/a", json={"value": 1})
    assert put.status_code == 200, put.text
    body = WorkflowInput(name="draft", trigger={"type": "manual"}, steps=[WRITES, READS])
    draft = await api.platform.workflows.draft(api.account_id, body)
    run = await api.platform.executor.test(draft, {})
    assert run.status == "success", run.error or run.steps
    wrote, read = (s["return_value"] for s in run.steps)
    # The step read the real record, then saw its own writes; the next step saw them too.
    assert wrote == {
        "before": 1,
        "a": None,
        "has": True,
        "entries": [["b", {"n": 2}], ["t", 1]],
    }
    assert read == {"seen": ["b", "t"], "after": []}
    # Nothing stored changed.
    records = (await api.client.get("/v1/data_stores/scratch/records")).json()["data"]
    assert records == [{"key": "a", "value": 1}]
    # A second test starts from the real records again.
    again = await api.platform.executor.test(draft, {})
    assert again.steps[0]["return_value"]["before"] == 1


async def test_a_deployed_workflows_last_test_of_each_step_is_kept(
    api: Api, other_api: Api
) -> None:
    platform = api.platform
    made = await api.client.post(
        "/v1/workflows", json={"name": "kept", "trigger": {"type": "manual"}, "steps": STEPS}
    )
    assert made.status_code == 200, made.text
    workflow_id = made.json()["data"]["id"]
    for n in (1, 2):  # the second test of a step replaces the first
        body = WorkflowInput(name="kept", trigger={"type": "manual"}, steps=STEPS[:1])
        draft = await platform.workflows.draft(api.account_id, body, workflow_id)
        await platform.step_tests.test(draft, {"n": n}, keep=True)
    kept = await platform.step_tests.last(api.account_id, workflow_id)
    assert list(kept) == ["first"]
    result = kept["first"].result
    assert result["status"] == "success" and result["steps"][0]["exports"] == {"double": 4}
    assert [line["msg"] for line in result["steps"][0]["logs"]] == ["got 2"]
    # Not a run; another account sees none of it; a new workflow's test is not kept.
    _, total = await platform.runs.page(workflow_id, limit=10, before=None, after=None)
    assert total == 0
    assert await platform.step_tests.last(other_api.account_id, workflow_id) == {}
    fresh = await platform.workflows.draft(api.account_id, WorkflowInput(steps=STEPS[:1]))
    await platform.step_tests.test(fresh, {"n": 1}, keep=False)
    assert await platform.step_tests.last(api.account_id, fresh.id) == {}
    # Deleting the workflow deletes its kept tests.
    assert (await api.client.delete(f"/v1/workflows/{workflow_id}")).status_code == 200
    assert await platform.step_tests.last(api.account_id, workflow_id) == {}
