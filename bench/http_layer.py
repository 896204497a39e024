"""What a request costs in the HTTP layer alone, below any of Sluice's own code (issue 29: "if
measurement shows Python's HTTP layer is the floor ..."). Four servers answer every POST with
200 ``{"success":true}`` after reading its body, alternated in each round:

- ``httptools``: an ``asyncio.Protocol`` on uvloop parsing with httptools and answering from
  the parser's callbacks, no ASGI: the floor of a Python server on the stack ``sluice serve``
  uses;
- ``uvicorn``: uvicorn (httptools, uvloop, proxy headers off, no access log, as ``sluice
  serve`` runs it) with a bare ASGI callable that reads the body and sends two prebuilt
  messages, as Sluice's endpoints do for their default answer (``api/ingress.serve``);
- ``uvicorn+guards``: the same with Sluice's HTTP protocol (``api/connections.protocol``: the
  head and body time-outs, the per-client cap, an answer's head and body in one write);
- ``uvicorn+direct``: that protocol handing every request to a ``connections.Direct`` that
  answers with the prebuilt default (``DirectCycle.answer_prebuilt``), as Sluice's endpoints are
  served: no ASGI cycle, a task per request once its body is in;
- ``starlette``: ``bench/_bare_app.py``, the baseline of goal 3.

Each server on CPU 0, ``wrk -c<C>`` on CPU 1, 1 s of warm-up then ``--seconds`` measured:
requests a second (wrk) and the server's CPU per request (``/proc``). The difference between
``httptools`` and ``uvicorn`` is what the ASGI cycle costs a request; Sluice's own ingest path
comes on top of ``uvicorn+guards`` (``bench/asgi_servers.py --role api``).

Run:  .venv/bin/python bench/http_layer.py [--rounds 3] [--seconds 5] [--concurrency 64]
Results: printed rows, the worst of the rounds, and bench/results/http_layer.json.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _server import BENCH_DIR, environment, free_port, write_results, wrk_post
from asgi_servers import pin
from ingest import cpu_seconds

KINDS = ("httptools", "uvicorn", "uvicorn+guards", "uvicorn+direct", "starlette")
BODY = b'{"success":true}'
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n"
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"16")],
}
END = {"type": "http.response.body", "body": BODY}


class RawHttp(asyncio.Protocol):
    """HTTP/1.1 keep-alive straight from httptools' callbacks: the body read, then answered."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        import httptools

        self.transport: Any = transport  # uvloop's TCPTransport, not an asyncio.Transport
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.body = []
        self.transport.write(HEAD + BODY)


async def bare_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:  # the body read whole, as Sluice's endpoints read it
        more = (await receive()).get("more_body", False)
    await send(START)
    await send(END)


class BareDirect:
    """A ``connections.Direct`` taking every request: the default answer, prebuilt."""

    def __init__(self) -> None:
        from sluice.api import connections

        self.answer = connections.Prebuilt(200, START["headers"], BODY)

    def take(self, scope: dict[str, Any]) -> Any:
        return self.handle

    async def handle(self, cycle: Any) -> None:
        cycle.answer_prebuilt(self.answer)


async def direct_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The lifespan puts a ``BareDirect`` in the state; nothing else comes as ASGI."""
    from sluice.api import connections

    if scope["type"] == "lifespan":
        await receive()
        scope["state"][connections.DIRECT] = BareDirect()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await bare_asgi(scope, receive, send)


def serve(kind: str, port: int) -> None:
    import uvicorn
    import uvloop

    if kind == "httptools":

        async def main() -> None:
            server = await asyncio.get_running_loop().create_server(RawHttp, "127.0.0.1", port)
            await server.serve_forever()

        uvloop.run(main())
        return
    http: Any = "httptools"
    if kind in ("uvicorn+guards", "uvicorn+direct"):
        from sluice import public_url
        from sluice.api import connections

        counts = connections.ClientCounts(0, public_url.TrustedProxies(""))
        http = connections.protocol(10.0, counts, 30.0, 1024)
    direct = kind == "uvicorn+direct"
    uvicorn.run(
        direct_app if direct else bare_asgi,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http=http,
        lifespan="on" if direct else "off",
        proxy_headers=False,
    )


def start(kind: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    if kind == "starlette":
        cmd = [sys.executable, str(BENCH_DIR / "_bare_app.py"), str(port)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", kind, str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited with {proc.returncode}")
        try:
            httpx.post(url, content=b"{}", timeout=2)
            return proc, url
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start in 30 s") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    rows: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for kind in KINDS:
            proc, url = start(kind)
            try:
                wrk_post(url, '{"i":1}', seconds=1, concurrency=args.concurrency)
                pin(proc.pid, 0)
                before = cpu_seconds(proc.pid)
                cell = wrk_post(url, '{"i":1}', seconds=args.seconds, concurrency=args.concurrency)
                used = cpu_seconds(proc.pid) - before
            finally:
                proc.terminate()
                proc.wait(30)
            row = {"round": round_, "kind": kind, **cell}
            row["cpu_us"] = used / max(cell["requests"], 1) * 1e6
            rows.append(row)
            print(
                f"round {round_} {kind:15} {cell['rps']:9.0f} req/s  {row['cpu_us']:5.1f} µs "
                f"of CPU a request  non-2xx {cell['non_2xx']}",
                flush=True,
            )
    print("worst of the rounds (fewest req/s, most µs a request):")
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        print(
            f"  {kind:15} {min(r['rps'] for r in mine):9.0f} req/s  "
            f"{max(r['cpu_us'] for r in mine):5.1f} µs"
        )
    out = write_results(
        "http_layer", {"concurrency": args.concurrency, "rows": rows, "env": environment()}
    )
    print(f"results: {out}")


if __name__ == "__main__":
    main()
