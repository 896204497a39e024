"""``.ci/docrefs.py`` (CI's check for docstrings naming what does not exist) tells a stale
reference from a live one, read from the module that names it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docrefs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docrefs", ROOT / ".ci" / "docrefs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docrefs"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def index(docrefs: ModuleType) -> object:
    return docrefs.build_index()


LIVE = [
    "engine/queue/jobs.py",  # a path, from the repository's src/sluice
    "handlers/emit.py",  # a path by its tail
    "storage/jobs.add_batch",  # a module path and its attribute
    "JobWorker.run_now",  # a class anywhere, and its method
    "WorkerConfig.batch",  # a dataclass field
    "errors.LeaseLost",  # the module's own import
    "database.GroupWriter",  # a module by its last name
    "sluice.engine.ingress",
    "platform.jobs.drain()",  # an instance named for its class, through its base's field
    "runs.pause",  # a table's column
    "drain()",
    "respond()",  # the runtime's JavaScript
    "DueTimer",
    "process.env",  # not Python: lowercase and nowhere
    "httpx.MockTransport",  # a library's
    "multipart/form-data",  # not a path
]
STALE = [
    "engine/queue/holds.py",
    "holds.py",
    "storage/jobs.add_batches",
    "Ingress.run_job",
    "WorkerConfig.batches",
    "errors.NoSuchError",
    "sluice.engine.no_such_module",
    "holds.Slots",
    "no_such_function()",
    "DueTimers",
]


@pytest.mark.parametrize("ref", LIVE)
def test_a_live_reference_passes(docrefs: ModuleType, index: object, ref: str) -> None:
    ix: Any = index
    mod = ix.modules["sluice.engine.queue.jobs"]
    assert docrefs.check_ref(ix, mod, mod.path.parent, ref, markdown=False) is None


@pytest.mark.parametrize("ref", STALE)
def test_a_stale_reference_is_reported(docrefs: ModuleType, index: object, ref: str) -> None:
    ix: Any = index
    mod = ix.modules["sluice.engine.queue.jobs"]
    assert docrefs.check_ref(ix, mod, mod.path.parent, ref, markdown=False) is not None
