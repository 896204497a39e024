"""Without cgroups (issue 25): a 256 MB runner held 1 GiB in ``/dev/shm``, because the memory
watchdog counted only its processes' RSS, and pages of a tmpfs are in no RSS. Now it counts the
jail's tmpfs mounts too, and a sandbox whose watchdog cannot see them starts no runner.

Cgroups are taken away by pointing ``cgroups.ROOT`` at an empty directory (as on a host where
they are not writable). Before the change the first test's run succeeded (RSS about 70 MB
under a 150 MB limit, 120 MB in tmpfs unseen) and the second one's sandbox opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice import errors
from sluice.runtime import cgroups, watchdog
from sluice.runtime.pool import Invocation, PoolConfig, RunnerPool
from sluice.runtime.sandbox import Sandbox, SandboxConfig

FILL = """
import fs from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
export default { name: "Fill", version: "1", async run() {
  const mb = Buffer.alloc(1 << 20, 1);
  for (const dir of ["/dev/shm", "/tmp"]) for (let i = 0; i < 60; i++) fs.appendFileSync(`${dir}/f`, mb);
  await sleep(2000);
  return "survived";
} };
"""


@pytest.fixture
def no_cgroups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxConfig]:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path / "no-cgroups")
    components, store = tmp_path / "components", tmp_path / "npm-store"
    (components / ("0" * 64)).mkdir(parents=True)
    store.mkdir()
    (components / ("0" * 64) / "component.mjs").write_text(FILL)
    yield SandboxConfig(components_dir=components, npm_store_dir=store, memory_mb=150, tmp_mb=64)


async def test_the_watchdog_counts_what_the_jails_tmpfs_hold(no_cgroups: SandboxConfig) -> None:
    sandbox = Sandbox(no_cgroups)
    pool = RunnerPool(PoolConfig(max_runners=1), sandbox)
    async with pool:
        assert not sandbox.has_cgroups
        result = await pool.invoke(
            Invocation(
                owner_id="tmpfs-filler",
                worker_key="dc_fill:h",
                entry=str(no_cgroups.components_dir / ("0" * 64) / "component.mjs"),
                call={"kind": "run", "event": {}, "props": {}, "db": {}, "context": {}},
                timeout_ms=20_000,
                memory_mb=64,
            )
        )
    assert result.ok is False, result.value
    assert result.error is not None and result.error["code"] == "OUT_OF_MEMORY", result.error


def test_no_runner_starts_when_the_watchdog_cannot_see_the_jails_tmpfs(
    no_cgroups: SandboxConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(pid: int) -> int:
        # What /proc answers when the kernel refuses this process a look into the jail.
        raise PermissionError(13, "Permission denied", f"/proc/{pid}/root/tmp")

    monkeypatch.setattr(watchdog, "tmpfs_used", denied)
    sandbox = Sandbox(no_cgroups)
    with pytest.raises(errors.SandboxUnavailable, match="watchdog cannot see"):
        sandbox.open()
    sandbox.close()


def test_a_process_not_in_its_jail_yet_counts_no_tmpfs() -> None:
    """Seen through a process whose root is still the host's (bubblewrap between making the
    namespace and moving into the jail's root), ``/tmp`` is the host's: counting it killed
    runners for the host disk's use (35 GB seen in CI)."""
    assert os.statvfs("/tmp").f_blocks > os.statvfs("/tmp").f_bfree  # the host's is in use
    assert watchdog.tmpfs_used(os.getpid()) == 0
