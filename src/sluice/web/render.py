"""Pages: the Jinja2 environment (autoescaped: events are attacker-controlled), the security
headers every page carries, and the checked form of a state-changing request."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from sluice.web import session as sessions

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

#: No inline script or style anywhere: everything comes from /assets (same origin).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; worker-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def _iso(ts_s: float | None) -> str:
    if ts_s is None:
        return ""
    return datetime.fromtimestamp(ts_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@functools.cache
def _markdown() -> MarkdownIt:
    """Components' descriptions are Markdown. "js-default": no raw HTML (it is escaped), and
    links are validated (no javascript: or data: URLs): safe for text from any author. Made at
    the first page that shows one: markdown-it is ~20 ms of every server's start otherwise."""
    from markdown_it import MarkdownIt

    return MarkdownIt("js-default")


def _render_markdown(text: str | None) -> Markup:
    return Markup(_markdown().render(text or ""))  # noqa: S704 (markdown-it escapes the input)


env = Environment(
    loader=PackageLoader("sluice.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters["iso"] = _iso
env.filters["iso_ms"] = lambda ms: _iso(ms / 1000 if ms is not None else None)
env.filters["pretty"] = _pretty
env.filters["markdown"] = _render_markdown
env.filters["plain"] = lambda text: _render_markdown(text).striptags()
env.filters["stack_after_message"] = lambda error: _stack_after_message(error)
env.filters["compact"] = lambda v: json.dumps(v, ensure_ascii=False, default=str)


def page(
    request: Request,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    session: sessions.Session | None = None,
    status: int = 200,
) -> HTMLResponse:
    values = {"request": request, "session": session, "path": request.url.path}
    values.update(context or {})
    if request.method != "POST":
        values.pop("address", None)
    html = env.get_template(template).render(values)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def page_address(request: Request, address: str) -> dict[str, str]:
    """Context for a form's page shown again after a failed POST: the browser's address
    becomes ``address`` (the page's own GET), so a reload shows the page rather than posting
    the form a second time (app.js reads it)."""
    return {"address": address} if request.method == "POST" else {}


def redirect(url: str) -> RedirectResponse:
    """After a successful POST: see the result with a GET (no resubmission on reload)."""
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


async def checked_form(request: Request, session: sessions.Session) -> FormData:
    """The posted form, once its CSRF token and origin are checked (``Forbidden`` if not)."""
    form = await request.form()
    sent = request.headers.get(sessions.CSRF_HEADER) or form.get(sessions.CSRF_FIELD)
    sessions.check_csrf(request, session, sent if isinstance(sent, str) else None)
    return form


def text(form: FormData, name: str, default: str = "") -> str:
    value = form.get(name)
    return value if isinstance(value, str) else default


def _stack_after_message(error: dict[str, Any]) -> str:
    """An error's stack without its first line when that line is the message shown above
    it (``TypeError: x is undefined``): the page showed it twice."""
    stack = str(error.get("stack") or "")
    name = error.get("name") or error.get("code") or "Error"
    message = error.get("message") or error.get("msg") or ""
    first, _, rest = stack.partition("\n")
    if first.strip() in (f"{name}: {message}".strip(), str(message).strip()):
        return rest
    return stack


def code(form: FormData, name: str) -> str:
    """A code field as typed: browsers send a textarea's line breaks as CRLF (HTML's form
    encoding), which would be saved into the component's file."""
    return text(form, name).replace("\r\n", "\n")


def error_page(request: Request, message: str, code: str, status: int) -> HTMLResponse:
    """A refused or failed page request, as a page (the API's errors stay JSON)."""
    context = {"message": message, "code": code, "status": status}
    return page(request, "error.html", context, status=status)
