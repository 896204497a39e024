"""The app catalog's and OAuth's pure rules (domain/apps.py, domain/oauth.py)."""

from __future__ import annotations

import doctest
import urllib.parse

import pytest

from sluice import errors
from sluice.domain import apps, oauth


def test_doctests() -> None:
    assert doctest.testmod(oauth).failed == 0


def test_pkce_challenge_is_rfc7636s_example() -> None:
    # RFC 7636, Appendix B.
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert oauth.code_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_the_authorize_url() -> None:
    google = apps.BUILTIN_BY_SLUG["google"].oauth
    assert google is not None
    config = apps.check_oauth({"client_id": "cid"}, google)
    url = oauth.authorize_url(
        config, redirect="https://s.example/oauth/callback", state="st", verifier="v" * 43
    )
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert url.startswith("https://accounts.google.com/o/oauth2/v2/auth?")
    assert query["client_id"] == ["cid"] and query["state"] == ["st"]
    assert query["scope"] == ["openid email"] and query["access_type"] == ["offline"]
    assert query["code_challenge"] == [oauth.code_challenge("v" * 43)]


def test_token_answers() -> None:
    read = oauth.read_tokens({"access_token": "a", "expires_in": 60, "refresh_token": "r"}, 1000)
    assert (read.access_token, read.refresh_token, read.expires_at_ms) == ("a", "r", 61_000)
    assert oauth.read_tokens({"access_token": "a"}, 0).expires_at_ms is None
    with pytest.raises(errors.OAuthRefused, match="invalid_grant"):
        oauth.read_tokens({"error": "invalid_grant"}, 0)
    with pytest.raises(errors.OAuthRefused, match="invalid_code"):
        oauth.read_tokens({"ok": False, "error": "invalid_code"}, 0)  # Slack's shape
    kept = oauth.credentials(
        oauth.read_tokens({"access_token": "new"}, 0),
        uid=None,
        client_id="c",
        before={"oauth_refresh_token": "old-r", "oauth_uid": "U1"},
    )
    assert kept == {
        "oauth_access_token": "new",
        "oauth_refresh_token": "old-r",
        "oauth_uid": "U1",
        "oauth_client_id": "c",
    }
    assert oauth.uid_of({"authed_user": {"id": "U9"}}, "authed_user.id") == "U9"
    assert oauth.uid_of({"id": 42}, "id") == "42" and oauth.uid_of({}, "id") is None


def test_key_credentials_and_registrations() -> None:
    bot = apps.BUILTIN_BY_SLUG["discord_bot"]
    assert apps.check_credentials(bot, {"bot_token": "t", "guild_id": ""}) == {"bot_token": "t"}
    with pytest.raises(errors.InvalidRequest):
        apps.check_credentials(bot, {"bot_token": 5})
    made = apps.registered(
        {"name": "CRM", "custom_fields": [{"name": "key", "type": "password"}]}, None, "crm"
    )
    assert made.fields == (apps.Field("key", "key", secret=True),)
    with pytest.raises(errors.InvalidRequest):
        apps.check_slug("Bad-Slug")
    with pytest.raises(errors.InvalidRequest):
        apps.check_oauth({"authorize_url": "ftp://x", "token_url": "https://t"}, None)
    assert apps.builtin_id("slack") == apps.builtin_id("slack") != apps.builtin_id("github")
