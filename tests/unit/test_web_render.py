"""Pages' filters (web/render.py): a component's Markdown description, from any author, becomes
HTML with its raw HTML escaped and no link to a script."""

from __future__ import annotations

from sluice.web import render


def test_markdown_escapes_raw_html_and_drops_script_links() -> None:
    markdown = render.env.filters["markdown"]
    html = str(
        markdown(
            "**Sends** <script>alert(1)</script> [x](javascript:alert(1)) [y](https://a.example)"
        )
    )
    assert "<strong>Sends</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    assert '<a href="https://a.example">y</a>' in html
    assert str(markdown(None)) == ""
    assert str(render.env.filters["plain"]("a *b*")) == "a b"
