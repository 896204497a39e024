"""The e-mail source in the browser, against a real ``sluice serve`` with its SMTP listener on
(``SLUICE_SMTP_INBOUND_PORT``), on SQLite and on PostgreSQL: deployed from the registry, its
address shown on its page, a message sent there with smtplib arrives live as an event."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from email.message import EmailMessage

import pytest
from playwright.sync_api import Page, expect

from tests.ports import free_port
from tests.ui.conftest import Server, database_name, serve_on

DOMAIN = "inbound.sluice.test"


@pytest.fixture(scope="module")
def mail_port() -> int:
    return free_port()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, mail_port: int
) -> Iterator[Server]:
    env = {"SLUICE_SMTP_INBOUND_PORT": str(mail_port), "SLUICE_EMAIL_DOMAIN": DOMAIN}
    data_dir = tmp_path_factory.mktemp(f"ui-mail-{request.param}")
    name = database_name("mail")
    with serve_on(request.param, data_dir, name, env) as running:
        yield running


def test_an_email_source_receives_a_message_live(page: Page, mail_port: int) -> None:
    page.goto("/sources?action=create&key=email-new-messages")
    expect(page.get_by_role("heading", name="Deploy New Messages")).to_be_visible()
    page.locator("#name").fill("inbox")
    page.get_by_role("button", name="Deploy").click()
    address = page.locator("#mail-address")
    expect(address).to_contain_text(f"@{DOMAIN}")
    expect(page.locator("[data-mail-off]")).to_have_count(0)
    expect(page.locator("[data-live-status]")).to_have_text("live")

    message = EmailMessage()
    message["From"] = "Grace <grace@example.com>"
    message["To"] = address.inner_text()
    message["Subject"] = "Ship it"
    message.set_content("The release is ready.")
    with smtplib.SMTP("127.0.0.1", mail_port, timeout=30) as client:
        client.send_message(message)
    rows = page.locator("[data-event-rows] tr")
    expect(rows).to_have_count(1)  # arrived without a reload
    expect(rows.first).to_contain_text("grace@example.com: Ship it")
    rows.first.click()
    expect(page.locator("[data-inspector] [data-event-json]")).to_contain_text(
        '"text": "The release is ready.\\n"'
    )
