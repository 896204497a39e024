"""``sluice apps``: the catalog, an operator registering and editing apps, and the start of
an OAuth connection, against a real ``sluice serve``."""

from __future__ import annotations

import json

import httpx

from tests.e2e import test_cli
from tests.e2e.test_cli import Cli, one_line_error

# The same module-scoped fixture: one server, one account, a config file from `sluice login`.
cli = test_cli.cli


def test_apps_list_set_and_connect(cli: Cli) -> None:
    listed = json.loads(cli.ok("apps", "list", "slack", "--json"))
    assert [a["name_slug"] for a in listed] == ["slack", "slack_bot"]
    assert "needs a client" in cli.ok("apps", "list", "github")
    one_line_error(cli.run("apps", "set", "crm", "--name", "CRM"), "admin")

    created = cli.ok("accounts", "create", "--name", "ops", "--admin")
    admin = {"SLUICE_API_KEY": json.loads(created)["api_key"]}
    made = cli.run(
        "apps", "set", "crm", "--name", "CRM", "--auth-type", "keys",
        "--field", "api_key:API Key:secret", "--field", "region:Region:optional",
        env=admin,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    fields = json.loads(json.loads(made.stdout)["custom_fields_json"])
    assert [(f["name"], f["type"], f["optional"]) for f in fields] == [
        ("api_key", "password", None),
        ("region", "string", True),
    ]
    github = cli.run(
        "apps", "set", "github", "--client-id", "Iv1.abc", "--client-secret", "gh-secret-123",
        env=admin,
    )  # fmt: skip
    assert github.returncode == 0, github.stderr
    assert "gh-secret-123" not in github.stdout
    shown = json.loads(cli.ok("apps", "show", "github"))
    assert shown["connectable"] is True and shown["oauth"]["client_id"] == "Iv1.abc"

    link = cli.ok("apps", "connect", "github").strip()
    assert link.startswith(cli.base_url + "/oauth/start?state=")  # SLUICE_PUBLIC_URL's default
    # A browser opening the link is asked first, then sent on to GitHub.
    with httpx.Client(timeout=30) as browser:
        asked = browser.get(link)
        assert asked.status_code == 200 and "Continue to GitHub" in asked.text, asked.text
        state = link.split("state=", 1)[1]
        went = browser.post(
            cli.base_url + "/oauth/start", data={"state": state}, headers={"Origin": cli.base_url}
        )
    assert went.status_code == 303, went.text
    url = went.headers["location"]
    assert url.startswith("https://github.com/login/oauth/authorize?")
    assert "client_id=Iv1.abc" in url and "code_challenge_method=S256" in url
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in url
