"""Settings → E-mail address (issue 25): the address, whether it is verified, a button that
sends the verification link; in Chromium on a real server, the link read from its outbox.
Before, only the API (``POST /v1/users/me/email/verification``) and the CLI could send it."""

from __future__ import annotations

import re
from email import policy
from email.parser import BytesParser

from playwright.sync_api import Page, expect

from tests.ui.conftest import Server


def _links_to(server: Server, address: str) -> list[str]:
    links = []
    for path in sorted((server.data_dir / "outbox").glob("*.eml")):
        msg = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
        if msg["To"] == address:
            body = msg.get_body(preferencelist=("plain",))
            assert body is not None
            links += re.findall(r"https?://\S+token=\S+", body.get_content())
    return links


def test_a_new_address_is_verified_from_the_settings_page(page: Page, server: Server) -> None:
    page.goto("/settings")
    state = page.locator("[data-email-state]")
    # The owner's address, given at the first run, counts as verified: no button to send.
    expect(state).to_contain_text("ada@example.com")
    expect(state).to_contain_text("verified")
    expect(state).not_to_contain_text("not verified")
    expect(page.get_by_role("button", name="Send verification e-mail")).to_have_count(0)

    page.get_by_label("Address").fill("ada.new@example.com")
    page.get_by_role("button", name="Save address").click()
    expect(state).to_contain_text("ada.new@example.com")
    expect(state).to_contain_text("not verified")

    page.get_by_role("button", name="Send verification e-mail").click()
    expect(page.get_by_role("status")).to_contain_text(
        "A verification link went to ada.new@example.com"
    )
    expect(page).to_have_url(f"{server.url}/settings")
    (link,) = _links_to(server, "ada.new@example.com")
    # A second link at once is refused, and the page says why.
    page.get_by_role("button", name="Send verification e-mail").click()
    expect(page.get_by_role("alert")).to_contain_text("less than")
    assert len(_links_to(server, "ada.new@example.com")) == 1

    page.goto(link)
    page.goto("/settings")
    expect(state).to_contain_text("ada.new@example.com")
    expect(state).not_to_contain_text("not verified")
    expect(state).to_contain_text("verified")
    expect(page.get_by_role("button", name="Send verification e-mail")).to_have_count(0)
