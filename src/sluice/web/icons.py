"""App icons for the builder's pickers (Browse actions, the trigger list), from this server
only: the page's CSP allows images from ``'self'`` and ``data:`` and no CDN is reached. An
app's ``img_src`` is used when it is local (a path on this server or a ``data:image/`` URI);
otherwise the icon is a generated monogram: the app's initials on a colour derived from its
slug, as an SVG ``data:`` URI (the same app always gets the same colour).

>>> icon_src("slack", "Slack", None).startswith("data:image/svg+xml;base64,")
True
>>> initials("google_sheets", "Google Sheets"), initials("http", "HTTP / Webhook")
('GS', 'HW')
>>> icon_src("x", "X", "https://cdn.example/x.png") == icon_src("x", "X", None)
True
"""

from __future__ import annotations

import base64
import hashlib
import re

_WORD = re.compile(r"[A-Za-z0-9]+")


def initials(slug: str, name: str | None) -> str:
    """Up to two letters: the first of the name's first two words (of the slug's if the name
    has none)."""
    words = _WORD.findall(name or "") or _WORD.findall(slug.replace("_", " ")) or ["?"]
    return "".join(w[0] for w in words[:2]).upper()


def _hue(slug: str) -> int:
    return int(hashlib.sha256(slug.encode()).hexdigest()[:4], 16) % 360


def monogram(slug: str, name: str | None) -> str:
    """The generated icon: an SVG ``data:`` URI (its text is letters and digits only)."""
    letters = initials(slug, name)
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">'
        f'<rect width="32" height="32" rx="7" fill="hsl({_hue(slug)},52%,40%)"/>'
        '<text x="16" y="21" font-family="sans-serif" font-size="13" font-weight="700" '
        f'text-anchor="middle" fill="#fff">{letters}</text></svg>'
    )
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def _local(img_src: str | None) -> bool:
    if not img_src:
        return False
    if img_src.startswith("data:image/"):
        return True
    return img_src.startswith("/") and not img_src.startswith("//")


def icon_src(slug: str, name: str | None, img_src: str | None) -> str:
    """The ``src`` of an app's icon: its own image when served from here, else its monogram."""
    return img_src if img_src and _local(img_src) else monogram(slug, name)
