"""Errors shown to users never name the server's directories, and leave other paths alone."""

from __future__ import annotations

from pathlib import Path

from sluice.engine.components.components import scrub_paths

TREE = Path("/srv/sluice/data/components/ab12")


def test_server_paths_are_shown_relative_to_the_component() -> None:
    message = (
        "Cannot find module '/srv/sluice/data/components/rss.app.mjs' imported from "
        "file:///srv/sluice/data/components/ab12/sources/x/x.mjs"
    )
    assert scrub_paths(message, TREE) == (
        "Cannot find module '../rss.app.mjs' imported from sources/x/x.mjs"
    )
    stack = "at get (/srv/sluice/npm/store/node_modules/axios/lib/core.js:12:3)"
    assert scrub_paths(stack, TREE) == "at get (node_modules/axios/lib/core.js:12:3)"
    deep = "/srv/sluice/data/state/private.key"
    assert "/srv/sluice" not in scrub_paths(f"open {deep}", TREE)


def test_other_paths_and_urls_stay_as_they_are() -> None:
    for text in (
        "GET /v1/things failed with 404",
        "wrote /tmp/file.txt",
        "see https://example.com/a/b.json and ./local/x.mjs",
    ):
        assert scrub_paths(text, TREE) == text
