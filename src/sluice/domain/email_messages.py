"""Inbound e-mail (the ``email-new-messages`` source): which source an address names, and a
received message as the source's event. Pure.

A source's address is ``<source id>@<domain>`` (``SLUICE_EMAIL_DOMAIN``); the domain is
compared without case, the id as written (ids are case-sensitive).

>>> source_of("dc_AbC12@Mail.Example.org", "mail.example.org")
'dc_AbC12'
>>> source_of("dc_AbC12@other.org", "mail.example.org") is None
True
>>> source_of("<x@mail.example.org>", "mail.example.org") is None
True
>>> raw = b"From: Ada <ada@example.com>\\r\\nTo: dc_1@m.test\\r\\nSubject: Hi\\r\\n\\r\\nHi\\r\\n"
>>> event = event_of(raw, "ada@example.com", ["dc_1@m.test"])
>>> event["subject"], event["from"]["address"], event["text"]
('Hi', 'ada@example.com', 'Hi\\n')
"""

from __future__ import annotations

import base64
import email
import email.policy
import email.utils
import re
from email.message import EmailMessage, MIMEPart
from typing import Any

#: The event type the core component emits; the key of the core source.
SOURCE_KEY = "email-new-messages"
_ID = re.compile(r"^dc_[A-Za-z0-9]{1,36}$")


def source_of(address: str, domain: str) -> str | None:
    """The source id an envelope recipient names, or None (another domain, not an id)."""
    local, at, host = address.rpartition("@")
    if not at or host.lower().rstrip(".") != domain.lower().rstrip("."):
        return None
    return local if _ID.match(local) else None


def _address(text: str) -> dict[str, str]:
    name, address = email.utils.parseaddr(text)
    return {"name": name, "address": address, "text": text}


def _addresses(values: list[str]) -> list[dict[str, str]]:
    return [
        {"name": name, "address": address, "text": email.utils.formataddr((name, address))}
        for name, address in email.utils.getaddresses(values)
        if address
    ]


def _header(message: MIMEPart, name: str) -> str | None:
    value = message.get(name)
    return None if value is None else str(value)


def _attachment(part: MIMEPart) -> dict[str, Any]:
    payload = part.get_payload(decode=True)
    content = payload if isinstance(payload, bytes) else b""
    return {
        "filename": part.get_filename(),
        "contentType": part.get_content_type(),
        "contentId": _header(part, "Content-ID"),
        "size": len(content),
        "contentBase64": base64.b64encode(content).decode(),
    }


def _text(part: MIMEPart | None) -> str | None:
    if part is None:
        return None
    try:
        text = str(part.get_content())
    except (LookupError, ValueError):  # an unknown charset, a broken encoding
        payload = part.get_payload(decode=True)
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return text.replace("\r\n", "\n")  # SMTP's line breaks


def event_of(raw: bytes, mail_from: str, rcpt_to: list[str]) -> dict[str, Any]:
    """The message as the source's event: its envelope, headers (names in lower case, a
    repeated one's values joined by a line break), addresses, text and HTML bodies and
    attachments (base64)."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    headers: dict[str, str] = {}
    for name, value in message.items():
        key = name.lower()
        headers[key] = f"{headers[key]}\n{value}" if key in headers else str(value)
    attachments = [_attachment(part) for part in message.iter_attachments()]
    return {
        "messageId": _header(message, "Message-ID"),
        "date": _header(message, "Date"),
        "subject": _header(message, "Subject"),
        "from": _address(str(message.get("From") or "")),
        "to": _addresses([str(v) for v in message.get_all("To") or []]),
        "cc": _addresses([str(v) for v in message.get_all("Cc") or []]),
        "replyTo": _addresses([str(v) for v in message.get_all("Reply-To") or []]),
        "headers": headers,
        "text": _text(message.get_body(preferencelist=("plain",))),
        "html": _text(message.get_body(preferencelist=("html",))),
        "attachments": attachments,
        "envelope": {"mailFrom": mail_from, "rcptTo": rcpt_to},
        "size": len(raw),
    }
