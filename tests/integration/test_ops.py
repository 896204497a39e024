"""/healthz, /readyz and /metrics on the in-process app (issue 16)."""

from __future__ import annotations

import dataclasses

import httpx

from sluice.api.app import serving
from tests.conftest import Api

COMPONENT = """export default { name: "Metered", version: "0.0.1", props: {},
  async run(event) { if (event.fail) throw new Error("asked"); this.$emit({ok: 1}); } };"""


async def test_health_and_readiness(api: Api) -> None:
    assert (await api.client.get("/healthz", headers={"Authorization": ""})).json() == {
        "status": "ok"
    }
    ready = await api.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


async def test_metrics_count_requests_runs_errors_and_the_queue(api: Api) -> None:
    deployed = await api.client.post("/v1/sources", json={"component_code": COMPONENT})
    source_id = deployed.json()["data"]["id"]
    for event in ({}, {"fail": True}):
        await api.client.post(f"/v1/sources/{source_id}/run", json={"event": event})
    await api.client.get("/v1/sources/dc_nope")
    page = await api.client.get("/metrics", headers={"Authorization": ""})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    text = page.text
    assert 'sluice_runs_total{kind="run",outcome="ok"}' in text
    assert 'sluice_runs_total{kind="run",outcome="error"}' in text
    assert 'sluice_errors_total{code="Error",kind="run"}' in text
    assert 'sluice_errors_total{code="not_found",kind="api"}' in text
    assert 'sluice_http_requests_total{kind="api",status="404"}' in text
    assert 'sluice_run_duration_seconds_bucket{kind="run",le="+Inf"}' in text
    assert "sluice_job_oldest_queued_age_seconds" in text
    # Sums over all accounts: no account's ids in it.
    assert api.account_id not in text and source_id not in text


async def test_a_metrics_token_guards_the_page(api: Api) -> None:
    settings = dataclasses.replace(api.platform.settings, metrics_token="s3cret")
    platform = dataclasses.replace(api.platform, settings=settings)
    transport = httpx.ASGITransport(app=serving(platform))
    async with httpx.AsyncClient(transport=transport, base_url="http://sluice.test") as client:
        refused = await client.get("/metrics", headers={"Authorization": f"Bearer {api.api_key}"})
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
        allowed = await client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status_code == 200 and "sluice_runs_total" in allowed.text


def _count(text: str, labels: str) -> float:
    prefix = f"sluice_http_requests_total{{{labels}}} "
    return sum(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


async def test_endpoint_answers_are_counted_by_status(api: Api) -> None:
    """The endpoints' hot path sends its prebuilt answer itself; it is counted all the same."""
    code = """export default { name: "Counted", version: "0.0.1",
  props: { http: "$.interface.http" }, async run(e) { this.$emit(e) } };"""
    deployed = await api.client.post("/v1/sources", json={"component_code": code})
    assert deployed.status_code == 200, deployed.text
    path = "/e/" + deployed.json()["data"]["endpoint_url"].rsplit("/", 1)[1]
    metrics = {"Authorization": ""}
    ok, missing = 'kind="endpoint",status="200"', 'kind="endpoint",status="404"'
    before = (await api.client.get("/metrics", headers=metrics)).text
    for _ in range(3):
        assert (await api.client.post(path, json={"a": 1}, headers=metrics)).status_code == 200
    assert (await api.client.post("/e/en_nope", json={}, headers=metrics)).status_code == 404
    after = (await api.client.get("/metrics", headers=metrics)).text
    assert _count(after, ok) - _count(before, ok) == 3
    assert _count(after, missing) - _count(before, missing) == 1
