"""One way to make a call into user code: every ``Invocation`` the engine hands the runner
pool is built here, so the worker key (which warm worker, and so which realm, serves it), the
entry, the limits, the environment and the data-store callback are decided in one place.

    worker key                          what runs                     built by
    <component id>:<code hash>          an action, its options or     ``of_component``
                                        additionalProps()
    <deployment id>:<code hash>         a deployed source             ``of_deployment``
    <workflow id>:<deployment id>       a workflow's steps            ``of_workflow``
    inspect:<code hash>:<random>        loading code to read its      ``of_inspection``
                                        shape (a worker of its own)
    inspect:<realm>                     the components of one package ``of_inspection``
                                        (a registry import), read in
                                        one realm

Limits: the memory limit is ``SLUICE_MEMORY_MB`` for all; the time limit is the caller's
(an action's, a source's, a workflow's). ``on_store`` answers the code's data-store calls
(``$.service.db``, ``data_store`` props); without it they fail, as an inspection's must.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.config import Settings
from sluice.domain.components import SavedComponent
from sluice.domain.deployments import Deployment
from sluice.runtime.port import Invocation, StoreCallback


def component_key(component: SavedComponent) -> str:
    """The worker of a saved component's code: its actions' runs, options and props."""
    return f"{component.id}:{component.code_hash}"


def of_component(
    settings: Settings,
    owner_id: str,
    component: SavedComponent,
    entry: Path,
    call: dict[str, Any],
    *,
    timeout_s: float,
    on_store: StoreCallback | None = None,
) -> Invocation:
    """A call of a saved component (an action run, a prop's options, ``additionalProps()``)
    in ``owner_id``'s runner."""
    return Invocation(
        owner_id=owner_id,
        worker_key=component_key(component),
        entry=str(entry),
        timeout_ms=int(timeout_s * 1000),
        memory_mb=settings.memory_mb,
        call=call,
        on_store=on_store,
    )


def of_inspection(
    settings: Settings,
    owner_id: str,
    code_hash: str,
    entry: Path,
    nonce: str,
    *,
    realm: str | None = None,
) -> Invocation:
    """Loading code to read its shape, at most a minute, no data stores: in a worker of its
    own (``nonce``), never a warm one, ended after; or, with ``realm``, beside the other
    components of one package being imported (one worker for them all, so the modules they
    share load once: 94 components of a package took 44 s in a worker each and 3 s in one).
    A realm is for code of one origin only; ``evict`` its key when done."""
    return Invocation(
        owner_id=owner_id,
        worker_key=realm_key(realm) if realm else f"inspect:{code_hash}:{nonce}",
        entry=str(entry),
        call={"kind": "inspect", "shared": True} if realm else {"kind": "inspect"},
        timeout_ms=int(min(settings.source_timeout_seconds, 60) * 1000),
        memory_mb=settings.memory_mb,
    )


def realm_key(realm: str) -> str:
    """The worker key of an inspection ``realm`` (to evict it)."""
    return f"inspect:{realm}"


def deployment_key(deployment: Deployment, component: SavedComponent) -> str:
    """The worker of a deployed source at one version of its code (an update starts another)."""
    return f"{deployment.id}:{component.code_hash}"


def of_deployment(
    settings: Settings,
    deployment: Deployment,
    component: SavedComponent,
    entry: Path,
    call: dict[str, Any],
    *,
    timeout_ms: int,
    on_store: StoreCallback | None,
) -> Invocation:
    """A deployed source's call (run, hook) in its deployment's worker. Its environment holds
    only ``PD_COMPONENT`` (sources read no environment variables)."""
    return Invocation(
        owner_id=deployment.owner_id,
        worker_key=deployment_key(deployment, component),
        entry=str(entry),
        env={"PD_COMPONENT": deployment.id},
        on_store=on_store,
        timeout_ms=timeout_ms,
        memory_mb=settings.memory_mb,
        call=call,
    )


def of_workflow(
    settings: Settings,
    owner_id: str,
    workflow_id: str,
    deployment_id: str | None,
    entry: Path,
    call: dict[str, Any],
    *,
    env: dict[str, str],
    on_store: StoreCallback | None,
) -> Invocation:
    """A workflow's steps, in the worker of that workflow at one deployment of its steps;
    ``env`` is the account's environment variables (its code steps' ``process.env``)."""
    return Invocation(
        owner_id=owner_id,
        worker_key=f"{workflow_id}:{deployment_id}",
        entry=str(entry),
        timeout_ms=int(settings.workflow_timeout_seconds * 1000),
        memory_mb=settings.memory_mb,
        call=call,
        env=env,
        on_store=on_store,
    )
