"""The web UI (issue 12): server-rendered pages (Jinja2, htmx) at ``/``, served by the same
app as ``/v1``. Owns its routes, templates, static files, browser sessions' cookies and CSRF
checks, and the install of its npm front-end packages. Like ``api/``, it reaches the engine
only through ``platform`` (never storage, engine or runtime). See docs/ui.md."""
