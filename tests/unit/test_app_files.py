"""What an imported package's app file tells the catalog (``domain/app_files.py``)."""

from __future__ import annotations

import json

import pytest

from sluice.domain import app_files


def files(app_code: str, description: str | None = None, name: str = "x.app.mjs") -> dict[str, str]:
    meta = {} if description is None else {"description": description}
    return {
        name: app_code,
        "package.json": json.dumps(meta),
        "actions/a/a.mjs": "export default {}",
    }


@pytest.mark.parametrize(
    ("code", "auth_type", "fields"),
    [
        (
            'app: "x", m() { return this.$auth.oauth_access_token; }',
            "oauth",
            ("oauth_access_token",),
        ),
        (
            'app: "x", m() { return [this.$auth.api_key, this.$auth?.domain]; }',
            "keys",
            ("api_key", "domain"),
        ),
        ('app: "x", m() { const { token, host: h = 1 } = this.$auth; }', "keys", ("token", "host")),
        ('app: "x", m() { return this.$auth["secret_key"]; }', "keys", ("secret_key",)),
        ('app: "x", m() { return fetch(url); }', "none", ()),
        ('app: "x", m() { return sdk(this.$auth); }', "unknown", ()),
        # An OAuth field read anywhere makes it an OAuth app (its other fields are extras).
        (
            'app: "x", m() { return [this.$auth.oauth_uid, this.$auth.subdomain]; }',
            "oauth",
            ("oauth_uid", "subdomain"),
        ),
    ],
)
def test_auth_is_read_from_the_code(code: str, auth_type: str, fields: tuple[str, ...]) -> None:
    found = app_files.app_file("@pipedream/x", "1.0.0", files("export default { " + code + " };"))
    assert found is not None
    assert (found.auth_type, found.fields) == (auth_type, fields)


def test_slug_name_and_package() -> None:
    found = app_files.app_file(
        "@pipedream/google_sheets",
        "0.9.1",
        files(
            'export default { type: "app", app: "google_sheets" }',
            "Pipedream Google Sheets Components",
            "google_sheets.app.mjs",
        ),
    )
    assert found is not None
    assert (found.name_slug, found.name, found.path, found.package) == (
        "google_sheets",
        "Google Sheets",
        "google_sheets.app.mjs",
        "@pipedream/google_sheets@0.9.1",
    )
    # No description to read a name from: the slug in words.
    plain = app_files.app_file(
        "@pipedream/google_sheets", "1", files('export default { app: "google_sheets" }')
    )
    assert plain is not None and plain.name == "Google Sheets"


def test_no_app_file_or_no_catalog_slug() -> None:
    assert (
        app_files.app_file("@pipedream/x", "1", {"actions/a/a.mjs": "", "package.json": "{}"})
        is None
    )
    assert (
        app_files.app_file("@pipedream/x", "1", files('export default { app: "Bad-Slug" }')) is None
    )
    # Its own app's file first, when a package holds two.
    two = {"a.app.mjs": 'export default { app: "a" }', "x.app.mjs": 'export default { app: "x" }'}
    found = app_files.app_file("@pipedream/x", "1", two)
    assert found is not None and found.name_slug == "x"
