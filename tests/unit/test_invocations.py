"""Every call into user code is built by ``engine/components/invocations.py``: which warm worker (and so
which JS realm) serves it, with what limits and environment."""

from __future__ import annotations

from pathlib import Path

from sluice.config import Settings
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.engine.components import invocations

SETTINGS = Settings.from_env(
    {}, data_dir=Path("/nonexistent"), memory_mb=96, action_timeout_seconds=7.0
)


def component(code_hash: str = "h1") -> SavedComponent:
    return SavedComponent(
        "sc_1", "u_1", "app-do", "Do", "0.0.1", "action", None, "a.mjs", {"a.mjs": ""},
        code_hash, {}, None, {}, [], False, 0, 0,
    )  # fmt: skip


def deployment(deployment_id: str = "dc_1") -> Deployment:
    return Deployment(
        deployment_id, "u_1", "sc_1", "s", "s", {}, {}, True, None, None, 0, 0
    )  # fmt: skip


def test_a_components_calls_share_its_worker_and_get_the_callers_time_limit() -> None:
    run = invocations.of_component(
        SETTINGS, "u_2", component(), Path("/c/a.mjs"), {"kind": "action"}, timeout_s=7.0
    )
    options = invocations.of_component(
        SETTINGS, "u_2", component(), Path("/c/a.mjs"), {"kind": "options"}, timeout_s=2.5
    )
    assert run.worker_key == options.worker_key == "sc_1:h1"
    assert (run.owner_id, run.timeout_ms, options.timeout_ms) == ("u_2", 7000, 2500)
    assert run.memory_mb == 96 and run.env is None and run.on_store is None


def test_a_deployment_gets_a_new_worker_when_its_code_changes_and_no_environment() -> None:
    old = invocations.of_deployment(
        SETTINGS, deployment(), component("h1"), Path("/x"), {}, timeout_ms=1, on_store=None
    )
    new = invocations.of_deployment(
        SETTINGS, deployment(), component("h2"), Path("/x"), {}, timeout_ms=1, on_store=None
    )
    assert (old.worker_key, new.worker_key) == ("dc_1:h1", "dc_1:h2")
    assert old.env == {"PD_COMPONENT": "dc_1"}


def test_an_inspection_never_takes_a_warm_worker_and_is_capped_at_a_minute() -> None:
    settings = Settings.from_env({}, data_dir=Path("/nonexistent"), source_timeout_seconds=300.0)
    one = invocations.of_inspection(settings, "u_1", "h1", Path("/x"), "n1")
    two = invocations.of_inspection(settings, "u_1", "h1", Path("/x"), "n2")
    assert one.worker_key != two.worker_key
    assert one.timeout_ms == 60_000 and one.on_store is None


def test_a_workflow_runs_in_the_worker_of_its_deployment_with_the_accounts_env() -> None:
    inv = invocations.of_workflow(
        SETTINGS, "u_1", "p_1", "d_9", Path("/w.mjs"), {}, env={"K": "v"}, on_store=None
    )
    assert (inv.worker_key, inv.env) == ("p_1:d_9", {"K": "v"})
    assert inv.timeout_ms == int(SETTINGS.workflow_timeout_seconds * 1000)
