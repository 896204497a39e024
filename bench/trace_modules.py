"""How many Sluice modules one webhook request crosses, from ``/e/<id>`` to its stored event.

What it counts: an in-process platform (SQLite, the sandbox as configured) with one HTTP
source (``this.$emit(event.body)``). One request is POSTed to its endpoint through the ASGI app,
then the job worker runs its job. A profiler hook (``sys.setprofile``) records every Python
function call whose code lives under ``src/sluice/``, in order; the figures are:

  modules   distinct ``sluice.*`` modules entered (the request's path plus the job's)
  climbs    calls from a lower layer into a higher one (``domain`` 0, ``storage``/``runtime`` 1,
            ``engine`` 2, ``platform`` 3, ``api`` 4; others are not ranked), counted once per
            (caller module, callee module) pair

Only the request and the job are traced, not the deploy. Module-level code (imports) is
excluded: everything is imported before tracing starts.

Run:  .venv/bin/python bench/trace_modules.py [--list]
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
RANK = {"domain": 0, "storage": 1, "runtime": 1, "engine": 2, "platform": 3, "api": 4}


def _module(filename: str) -> str | None:
    if not filename.startswith(SRC):
        return None
    rel = Path(filename).relative_to(SRC).with_suffix("")
    return "sluice." + ".".join(rel.parts)


def _rank(module: str) -> int | None:
    parts = module.split(".")
    return RANK.get(parts[1]) if len(parts) > 1 else None


async def _trace() -> tuple[list[str], set[tuple[str, str]], dict[str, list[str]]]:
    import httpx

    from sluice.api.app import create_app
    from sluice.config import Settings
    from sluice.platform import Platform

    order: list[str] = []
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
            low, high = _rank(caller), _rank(callee)
            if low is not None and high is not None and high > low:
                climbs.add((caller, callee))

    with tempfile.TemporaryDirectory(prefix="sluice-trace-") as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), http_rate_per_second=0)
        async with Platform.open(settings, background=False) as platform:
            _account, key = await platform.create_account("tracer", "t@example.com")
            app = create_app(platform=platform)
            transport = httpx.ASGITransport(app=app)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                made = await client.post(
                    "/v1/sources", json={"component_code": SOURCE}, headers=headers
                )
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
    return order, climbs, functions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the modules and climbs")
    parser.add_argument(
        "--functions", action="store_true", help="with --list: the functions called in each"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    order, climbs, functions = asyncio.run(_trace())
    print(f"modules crossed: {len(order)}; climbs back up: {len(climbs)}")
    if args.list:
        for module in order:
            called = f": {', '.join(functions[module])}" if args.functions else ""
            print(f"  {module}{called}")
        print("climbs:")
        print("\n".join(f"  {a} -> {b}" for a, b in sorted(climbs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
