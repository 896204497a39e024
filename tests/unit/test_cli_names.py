"""The CLI shows a source's name as the web UI and the API do, with the slug its commands take
beside it when the two differ (it showed only the slug)."""

from __future__ import annotations

import pytest

from sluice.cli import render


def test_the_name_first_then_the_slug(capsys: pytest.CaptureFixture[str]) -> None:
    source = {"id": "dc_1", "name": "My Webhook", "name_slug": "my-webhook", "active": True}
    render.source_summary(source, "Deployed")
    out = capsys.readouterr().out
    assert "Name:     My Webhook  (my-webhook)" in out
    render.sources_table([source, {"id": "dc_2", "name": "plain", "name_slug": "plain"}])
    table = capsys.readouterr().out
    assert "My Webhook (my-webhook)" in table and "plain (plain)" not in table
