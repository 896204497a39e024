"""How many Sluice modules a request crosses, on two walks:

  webhook   one request to an HTTP source's endpoint ``/e/<id>``, to its stored event: an
            in-process platform (SQLite, the sandbox as configured) with one HTTP source
            (``this.$emit(event.body)``); the request is POSTed through the ASGI app, then the
            job worker runs its job.
  failing   a workflow run that fails: ``POST /v1/workflows/<id>/runs`` of a workflow whose
            one code step throws, then every job that follows (the error forwarded to the
            account's global error workflow, that workflow's run and its e-mail summary).

A profiler hook (``sys.setprofile``) records every Python function call whose code lives under
``src/sluice/``, in order; the figures are:

  modules   distinct ``sluice.*`` modules entered
  edges     distinct (caller module, callee module) pairs of calls between two modules
  climbs    calls from a lower layer into a higher one (``domain`` 0, ``storage``/``runtime`` 1,
            ``engine`` 2, ``platform`` 3, ``api`` 4; others are not ranked), counted once per
            (caller module, callee module) pair

Only the walk is traced, not the set-up (a deploy, a warm-up request). Module-level code
(imports) is excluded: everything is imported before tracing starts.

Run:  .venv/bin/python bench/trace_modules.py [--walk webhook|failing|both] [--list]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = str(ROOT / "src" / "sluice")
SOURCE = (
    'export default { name: "t", version: "1", props: { http: "$.interface.http" },\n'
    "  async run(event) { this.$emit(event.body); } };\n"
)
THROWS = (
    "export default defineComponent({ async run({ steps }) { return steps.trigger.event.x.y; } });"
)
RANK = {"domain": 0, "storage": 1, "runtime": 1, "engine": 2, "platform": 3, "api": 4}


def _module(filename: str) -> str | None:
    if not filename.startswith(SRC):
        return None
    rel = Path(filename).relative_to(SRC).with_suffix("")
    return "sluice." + ".".join(rel.parts)


def _rank(module: str) -> int | None:
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


Walk = tuple[list[str], set[tuple[str, str]], set[tuple[str, str]], dict[str, list[str]]]


async def _trace(walk: str) -> Walk:
    import httpx

    from sluice.api.app import serving
    from sluice.config import Settings
    from sluice.platform import Platform

    order: list[str] = []
    edges: set[tuple[str, str]] = set()
    climbs: set[tuple[str, str]] = set()
    functions: dict[str, list[str]] = {}

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame.f_code.co_filename)
        if callee is None or frame.f_code.co_name == "<module>":
            return
        if callee not in order:
            order.append(callee)
        called = functions.setdefault(callee, [])
        if frame.f_code.co_qualname not in called:
            called.append(frame.f_code.co_qualname)
        back = frame.f_back
        while back is not None and _module(back.f_code.co_filename) is None:
            back = back.f_back
        caller = _module(back.f_code.co_filename) if back is not None else None
        if caller and caller != callee:
            edges.add((caller, callee))
            low, high = _rank(caller), _rank(callee)
            if low is not None and high is not None and high > low:
                climbs.add((caller, callee))

    with tempfile.TemporaryDirectory(prefix="sluice-trace-") as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), http_rate_per_second=0)
        async with Platform.open(settings, background=False) as platform:
            _account, key = await platform.create_account("tracer", "t@example.com")
            app = serving(platform)
            transport = httpx.ASGITransport(app=app)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                if walk == "webhook":
                    await _webhook(client, platform, headers, hook)
                else:
                    await _failing(client, platform, headers, hook)
    return order, edges, climbs, functions


async def _webhook(client: Any, platform: Any, headers: dict[str, str], hook: Any) -> None:
    made = await client.post("/v1/sources", json={"component_code": SOURCE}, headers=headers)
    source = made.json()["data"]
    path = "/e/" + source["endpoint_url"].rsplit("/", 1)[1]
    # Warm: the first request loads the worker and caches the endpoint.
    await client.post(path, json={"warm": True})
    await platform.jobs.drain()
    sys.setprofile(hook)
    try:
        answer = await client.post(path, json={"n": 1})
        ran = await platform.jobs.drain()
    finally:
        sys.setprofile(None)
    assert answer.status_code == 200 and ran == 1, (answer.status_code, ran)
    events = await client.get(
        f"/v1/sources/{source['id']}/event_summaries?expand=event", headers=headers
    )
    assert {"n": 1} in [e.get("event") for e in events.json()["data"]], events.text


async def _failing(client: Any, platform: Any, headers: dict[str, str], hook: Any) -> None:
    body = {
        "name": "fails",
        "trigger": {"type": "manual"},
        "steps": [{"name": "boom", "code": THROWS}],
    }
    made = await client.post("/v1/workflows", json=body, headers=headers)
    assert made.status_code == 200, made.text
    runs = f"/v1/workflows/{made.json()['data']['id']}/runs"
    # Warm: the first run loads the workers (the workflow's and the error workflow's).
    await client.post(runs, json={"event": {"warm": True}}, headers=headers)
    await platform.jobs.drain()
    sys.setprofile(hook)
    try:
        answer = await client.post(runs, json={"event": {"n": 1}}, headers=headers)
        ran = await platform.jobs.drain()
    finally:
        sys.setprofile(None)
    assert answer.status_code == 200 and answer.json()["data"]["status"] == "error", answer.text
    assert ran >= 1, ran  # at least the error's forward to the global error workflow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--walk", choices=["webhook", "failing", "both"], default="both")
    parser.add_argument("--list", action="store_true", help="print the modules and climbs")
    parser.add_argument(
        "--functions", action="store_true", help="with --list: the functions called in each"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    for walk in ["webhook", "failing"] if args.walk == "both" else [args.walk]:
        order, edges, climbs, functions = asyncio.run(_trace(walk))
        print(
            f"{walk}: modules crossed: {len(order)}; edges: {len(edges)}; "
            f"climbs back up: {len(climbs)}"
        )
        if args.list:
            for module in order:
                called = f": {', '.join(functions[module])}" if args.functions else ""
                print(f"  {module}{called}")
            print("climbs:")
            print("\n".join(f"  {a} -> {b}" for a, b in sorted(climbs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
