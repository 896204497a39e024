"""``$.send.email``: a message to the account owner, through the mailer (SMTP or the outbox)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice import errors
from sluice.engine.outbound.destinations.config import mapping, string
from sluice.engine.outbound.mailer import Mailer


@dataclass(frozen=True)
class EmailSend:
    subject: str
    text: str
    html: str | None


def check_email(config: object) -> EmailSend:
    """Validate a ``$.send.email`` config: ``subject``, ``text`` and ``html``, all optional
    strings (as in Pipedream). The subject is one line: line breaks in it become spaces (a
    header cannot hold them; the default error e-mail's subject quotes the error's code, which
    user code chooses)."""
    cfg = mapping("email", config)
    subject = " ".join(string("email", cfg, "subject", default="").splitlines())
    text = string("email", cfg, "text", default="")
    html = string("email", cfg, "html") if cfg.get("html") is not None else None
    return EmailSend(subject, text, html)


async def send_email(mailer: Mailer, *, to: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """Mail the account owner at ``to``; the outcome is the mailer's (``sent`` over SMTP,
    ``written`` to the outbox) or ``failed``."""
    send = check_email(config)
    if not to:
        return {
            "status": "failed",
            "error": "$.send.email: the account has no e-mail address; set one on the account "
            "to receive $.send.email messages",
        }
    try:
        return await mailer.send(to=to, subject=send.subject, text=send.text, html=send.html)
    except (errors.DeliveryFailed, errors.InvalidRequest) as exc:
        return {"status": "failed", "error": f"$.send.email: {exc.message}"}
