"""The README's first command for real: the `sluice` executable, a real server process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ports import free_port

SLUICE = str(Path(sys.executable).with_name("sluice"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    env = {**os.environ, "SLUICE_DATA_DIR": str(tmp_path), "SLUICE_PORT": str(port)}
    proc = subprocess.Popen(
        [SLUICE, "serve", "--host", "127.0.0.1"], env=env, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # wait for the server's own word that it is up
        seen.append(line)
        if "Application startup complete" in line:
            break
    else:
        proc.stderr.close()
        pytest.fail("sluice serve exited:\n" + "".join(seen))
    # Keep reading so the server never blocks on a full pipe.
    drain = threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}", tmp_path
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        drain.join(timeout=20)
        proc.stderr.close()


def test_accounts_create_then_the_tour(server: tuple[str, Path]) -> None:
    base, data_dir = server
    created = subprocess.run(
        [
            SLUICE,
            "accounts",
            "create",
            "--name",
            "ada",
            "--email",
            "ada@example.com",
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    account = json.loads(created.stdout)
    assert account["id"].startswith("u_") and account["api_key"].startswith("slk_")
    with httpx.Client(
        base_url=base, timeout=60, headers={"Authorization": f"Bearer {account['api_key']}"}
    ) as client:
        assert client.get("/v1/users/me").json()["data"]["username"] == "ada"
        assert client.get("/v1/users/me", headers={"Authorization": ""}).status_code == 401
        code = (
            'export default { name: "Counter", version: "0.0.1", props: { db: '
            '"$.service.db" }, async run(event) { const n = (this.db.get("n") || 0) + 1; '
            'this.db.set("n", n); this.$emit({ n, event }, { summary: `count is ${n}` }); } };'
        )
        component = client.post("/v1/components", json={"component_code": code}).json()["data"]
        source = client.post("/v1/sources", json={"component_id": component["id"]}).json()["data"]
        for _ in range(2):
            run = client.post(f"/v1/sources/{source['id']}/run", json={"event": {"hi": 1}})
            assert run.json()["data"]["ok"], run.text
        events = client.get(
            f"/v1/sources/{source['id']}/event_summaries", params={"expand": "event"}
        ).json()
        assert [e["event"]["n"] for e in events["data"]] == [2, 1]
    assert (data_dir / "sluice.db").exists() and (data_dir / "secret.key").exists()


def test_help_lists_every_flag_with_its_variable() -> None:
    out = subprocess.run(
        [SLUICE, "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    for flag, var in [
        ("--host", "SLUICE_HOST"),
        ("--port", "SLUICE_PORT"),
        ("--data-dir", "SLUICE_DATA_DIR"),
        ("--database-url", "SLUICE_DATABASE_URL"),
    ]:
        assert flag in out and var in out
    # Issue 26: the default was printed as "[http://:]" (host and port not known yet).
    assert "[http://HOST:PORT]" in out and "[http://:]" not in out


def _start(
    args: list[str], env: dict[str, str], ready: str
) -> tuple[subprocess.Popen[str], threading.Thread]:
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if ready in line:
            break
    else:
        proc.stderr.close()
        pytest.fail(f"{args} exited:\n" + "".join(seen))
    drain = threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True)
    drain.start()
    return proc, drain


def test_api_and_worker_roles_share_the_work(tmp_path: Path) -> None:
    """`serve --role api` stores requests; `serve --role worker` (another process) runs them
    and counts them on its own metrics port."""
    import time

    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "SLUICE_DATA_DIR": str(tmp_path),
        "SLUICE_PORT": str(port),
        "SLUICE_JOB_POLL_SECONDS": "0.05",
    }
    created = subprocess.run(
        [SLUICE, "accounts", "create", "--name", "ada", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    key = json.loads(created.stdout)["api_key"]
    api = _start(
        [SLUICE, "serve", "--host", "127.0.0.1", "--role", "api"], env, "Application startup"
    )
    worker = _start(
        [SLUICE, "serve", "--role", "worker"],
        {**env, "SLUICE_METRICS_PORT": str(metrics_port)},
        "Sluice worker ready",
    )
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=60,
            headers={"Authorization": f"Bearer {key}"},
        ) as client:
            step = "export default defineComponent({ async run({ steps }) { return steps.trigger.event.body } })"
            workflow = client.post(
                "/v1/workflows",
                json={"trigger": {"type": "http"}, "steps": [{"name": "keep", "code": step}]},
            ).json()["data"]
            path = workflow["endpoint_url"][workflow["endpoint_url"].index("/e/") :]
            assert client.post(path, json={"n": 1}).status_code == 200
            # The run happens in the worker process: nothing in the API process can be
            # awaited, so poll its result under a deadline.
            deadline = time.monotonic() + 30
            runs: list[dict[str, object]] = []
            while not runs and time.monotonic() < deadline:
                runs = client.get(f"/v1/workflows/{workflow['id']}/runs").json()["data"]
                time.sleep(0.05)
            assert runs and runs[0]["steps"][0]["return_value"] == {"n": 1}  # type: ignore[index]
        counted = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        assert counted.status_code == 200
        assert 'sluice_runs_total{kind="workflow",outcome="ok"} 1.0' in counted.text
    finally:
        for proc, drain in (api, worker):
            proc.terminate()
            proc.wait(timeout=20)
            drain.join(timeout=20)
            assert proc.stderr is not None
            proc.stderr.close()


def test_an_unknown_role_is_refused() -> None:
    done = subprocess.run([SLUICE, "serve", "--role", "nope"], capture_output=True, text=True)
    assert done.returncode == 2 and "--role is all, api or worker" in done.stderr


def test_a_taken_port_is_reported_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "SLUICE_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run(
            [SLUICE, "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
    # Said before the database was made and migrated.
    assert not (tmp_path / "data" / "sluice.db").exists()
    assert "Running upgrade" not in done.stderr
