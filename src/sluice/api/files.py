"""The URLs of stored bodies and uploaded files (``engine/runs/files.py``): ``GET`` (and ``HEAD``)
``/files/<id>/<secret>``, no API key: the secret is the credential, as in Pipedream's signed
URLs. See docs/api.md, "Large bodies and uploaded files".

The bytes are the sender's, served from Sluice's own origin, so they are never rendered there:
``Content-Disposition: attachment``, ``nosniff`` and a sandboxing CSP keep an uploaded HTML or
SVG file from running script beside the web UI.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.responses import Response

from sluice.api.auth import PlatformDep

router = APIRouter()


def _disposition(filename: str | None) -> str:
    if not filename:
        return "attachment"
    ascii_name = filename.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    ascii_name = "".join(c if c.isprintable() else "_" for c in ascii_name)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename)}"


async def get_file(file_id: str, secret: str, platform: PlatformDep) -> Response:
    """A stored body or uploaded file, as it came (404 once expired)."""
    meta, data = await platform.files.read(file_id, secret)
    return Response(
        content=data,
        media_type=meta.mimetype,
        headers={
            "Content-Disposition": _disposition(meta.filename),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, no-store",
        },
    )


# One route per method: each needs its own OpenAPI operation id.
for _method in ("GET", "HEAD"):
    router.add_api_route(
        "/files/{file_id}/{secret}",
        get_file,
        methods=[_method],
        operation_id=f"file_{_method.lower()}",
    )
