"""``/docs``: the API reference (Swagger UI from the npm package ``swagger-ui-dist``, served
from this install: FastAPI's default page loads it from a CDN and is blank offline)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from sluice.web import render

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def docs(request: Request) -> Response:
    return render.page(request, "docs.html", {})
