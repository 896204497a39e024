"""Inbound mail (``engine/mail_in.py``) on both dialects, with a real SMTP client (smtplib) on
loopback: a message to an ``email-new-messages`` source's address is stored before the ``250``
and becomes its event (headers, bodies, attachments parsed); unknown addresses and messages
over the size limit are refused."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import smtplib
from email.message import EmailMessage
from typing import Any

import pytest
import sqlalchemy as sa

from sluice.config import Settings
from sluice.engine.mail_in import MailIn
from sluice.platform import Platform
from sluice.storage.tables import jobs
from tests.conftest import Api
from tests.integration.test_core_components import _deploy, _events

DOMAIN = "mail.sluice.test"


def listener(platform: Platform, settings: Settings) -> MailIn:
    """The listener on a port the system picks, as ``Platform.open`` builds it."""
    return MailIn(
        settings, platform.reader, platform.enqueuer, platform.jobs,
        admission=platform.admission, quota=platform.commit.quota, port=0,
    )  # fmt: skip


def send(port: int, message: EmailMessage, to: list[str]) -> dict[str, Any]:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        return client.send_message(message, from_addr="ada@example.com", to_addrs=to)


def message(to: str, subject: str = "Order 42") -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Ada Lovelace <ada@example.com>"
    message["To"] = to
    message["Subject"] = subject
    message["Message-ID"] = "<m1@example.com>"
    message.set_content("Hello,\nplease ship order 42.\n")
    message.add_alternative("<p>Hello, please ship <b>order 42</b>.</p>", subtype="html")
    message.add_attachment(
        b"\x00\x01invoice", maintype="application", subtype="pdf", filename="invoice.pdf"
    )
    return message


async def _queued(api: Api, source_id: str) -> int:
    query = sa.select(sa.func.count()).select_from(jobs).where(jobs.c.target_id == source_id)
    return int(await api.platform.reader(lambda conn: conn.execute(query).scalar_one()))


async def test_a_message_to_a_sources_address_is_its_event(api: Api) -> None:
    settings = dataclasses.replace(api.platform.settings, email_domain=DOMAIN)
    platform = api.platform
    source = await _deploy(api, "email-new-messages", {})
    address = f"{source['id']}@{DOMAIN.upper()}"  # the domain without case
    async with listener(platform, settings) as mail:
        refused = await asyncio.to_thread(send, mail.port, message(address), [address])
        assert refused == {}
        # Answered 250 only once stored: the job is there before any worker ran.
        assert await _queued(api, source["id"]) == 1

        for unknown in (f"dc_nope1234567@{DOMAIN}", f"{source['id']}@other.test", f"x@{DOMAIN}"):
            with pytest.raises(smtplib.SMTPRecipientsRefused) as caught:
                await asyncio.to_thread(send, mail.port, message(unknown), [unknown])
            assert caught.value.recipients[unknown][0] == 550
    await platform.jobs.drain()
    (item,) = await _events(api, source["id"])
    event = item["event"]
    assert event["subject"] == "Order 42" and event["messageId"] == "<m1@example.com>"
    assert event["from"] == {
        "name": "Ada Lovelace",
        "address": "ada@example.com",
        "text": "Ada Lovelace <ada@example.com>",
    }
    assert [a["address"] for a in event["to"]] == [address]
    assert event["text"] == "Hello,\nplease ship order 42.\n"
    assert "<b>order 42</b>" in event["html"]
    assert event["headers"]["subject"] == "Order 42"
    (attachment,) = event["attachments"]
    assert (attachment["filename"], attachment["contentType"]) == ("invoice.pdf", "application/pdf")
    assert base64.b64decode(attachment["contentBase64"]) == b"\x00\x01invoice"
    assert event["envelope"] == {"mailFrom": "ada@example.com", "rcptTo": [address]}
    assert item["metadata"]["summary"] == "ada@example.com: Order 42"


async def test_a_deactivated_source_and_a_large_message_are_refused(api: Api) -> None:
    settings = dataclasses.replace(
        api.platform.settings, email_domain=DOMAIN, smtp_inbound_max_bytes=2000
    )
    platform = api.platform
    source = await _deploy(api, "email-new-messages", {})
    address = f"{source['id']}@{DOMAIN}"
    async with listener(platform, settings) as mail:
        big = message(address)
        big.add_attachment(b"x" * 5000, maintype="application", subtype="octet-stream")
        with pytest.raises((smtplib.SMTPSenderRefused, smtplib.SMTPDataError)) as caught:
            await asyncio.to_thread(send, mail.port, big, [address])
        assert caught.value.smtp_code == 552
        off = await api.client.put(f"/v1/sources/{source['id']}", json={"active": False})
        assert off.status_code == 200, off.text
        with pytest.raises(smtplib.SMTPRecipientsRefused):
            await asyncio.to_thread(send, mail.port, message(address), [address])
    assert await _queued(api, source["id"]) == 0
