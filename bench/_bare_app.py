"""The baseline of bench/ingest.py: a bare Starlette app answering every request 200
``{"success":true}`` (the body Sluice's endpoints answer), served by uvicorn with the settings
``sluice serve`` uses (one worker, ``access_log=False``, uvicorn's default loop and HTTP
parser, so uvloop and httptools when installed).

Run:  python bench/_bare_app.py <port>
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BODY = b'{"success":true}'


async def ok(request: Request) -> Response:
    await request.body()  # read it, as Sluice does
    return Response(BODY, media_type="application/json")


app = Starlette(routes=[Route("/{path:path}", ok, methods=["GET", "POST", "PUT"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
