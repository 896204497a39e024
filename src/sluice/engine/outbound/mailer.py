"""Outgoing mail: SMTP when ``SLUICE_SMTP_URL`` is set, else one ``.eml`` file per message in
``<data_dir>/outbox``.

``smtp_url`` forms (user and password are percent-decoded; both optional)::

    smtp://user:pass@host:25               plain SMTP (AUTH is sent in the clear)
    smtp://user:pass@host:587?starttls=1   STARTTLS before AUTH (default port 587)
    smtps://user:pass@host:465             implicit TLS (default port 465)

The password never appears in an exception, a log record or ``repr(mailer)``: messages name
the server as ``host:port`` only, and anything a server echoes back is scrubbed.

``send`` returns an outcome and raises ``DeliveryFailed`` when the message did not leave::

    {"status": "sent", "transport": "smtp", "message_id": "<...@example.com>"}
    {"status": "written", "transport": "outbox", "path": "/.../outbox/0001763712000123-9f2c.eml",
     "message_id": "<...>"}
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import secrets
import smtplib
import ssl
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from sluice import errors
from sluice.clock import Clock, SystemClock
from sluice.config import Settings

log = logging.getLogger(__name__)

#: Time limit of each SMTP socket operation (connect, one command), seconds.
SMTP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class SmtpTarget:
    host: str
    port: int
    security: Literal["none", "starttls", "tls"]
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def parse_smtp_url(url: str) -> SmtpTarget:
    """``parse_smtp_url("smtps://ada:pw@mail.example.com")`` → port 465, security "tls"."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    # Never echo the URL itself: it holds the password.
    shown = f"{scheme}://{parts.hostname or ''}"
    if scheme not in ("smtp", "smtps") or not parts.hostname:
        raise errors.InvalidRequest(
            f"setting smtp_url (SLUICE_SMTP_URL) must look like smtp://user:pass@host:port "
            f"or smtps://...; got {shown!r}",
            field="smtp_url",
        )
    query = {k.lower(): v[-1].lower() for k, v in parse_qs(parts.query).items()}
    starttls = query.get("starttls", "") in ("1", "true", "yes", "on")
    if scheme == "smtps" and starttls:
        raise errors.InvalidRequest(
            "setting smtp_url (SLUICE_SMTP_URL): smtps:// is already TLS; drop ?starttls=1",
            field="smtp_url",
        )
    try:
        port = parts.port
    except ValueError:
        raise errors.InvalidRequest(
            f"setting smtp_url (SLUICE_SMTP_URL): invalid port in {shown!r}", field="smtp_url"
        ) from None
    security: Literal["none", "starttls", "tls"] = (
        "tls" if scheme == "smtps" else "starttls" if starttls else "none"
    )
    default_port = {"tls": 465, "starttls": 587, "none": 25}[security]
    return SmtpTarget(
        host=parts.hostname,
        port=port or default_port,
        security=security,
        username=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
    )


def _check_one_line(name: str, value: str) -> None:
    # Header injection: a CR or LF would let the value start new headers.
    if "\r" in value or "\n" in value:
        raise errors.InvalidRequest(f"mail {name} must be one line (no CR or LF)", field=name)


def build_message(
    *, sender: str, to: str, subject: str, text: str, html: str | None, now_ms: int
) -> EmailMessage:
    """A message with From/To/Subject/Date/Message-ID; multipart/alternative when html is given."""
    _check_one_line("to", to)
    _check_one_line("subject", subject)
    addresses = email.utils.getaddresses([to])
    if not addresses or any("@" not in addr for _, addr in addresses):
        raise errors.InvalidRequest(f"mail to {to!r} is not an e-mail address", field="to")
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(datetime.fromtimestamp(now_ms / 1000, UTC))
    # make_msgid's default domain is socket.getfqdn(), which can block on DNS.
    domain = email.utils.parseaddr(sender)[1].rpartition("@")[2] or "localhost"
    msg["Message-ID"] = email.utils.make_msgid(domain=domain)
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    return msg


class Mailer:
    """Sends mail as ``settings.mail_from``; built once from Settings.

    ``ssl_context`` verifies the server for ``smtps://`` and STARTTLS (default: the system's
    trust store); ``clock`` dates the messages and names the outbox files.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        ssl_context: ssl.SSLContext | None = None,
        clock: Clock | None = None,
        timeout: float = SMTP_TIMEOUT_SECONDS,
    ) -> None:
        self.sender = settings.mail_from
        self.outbox_dir = settings.outbox_dir
        self.target = parse_smtp_url(settings.smtp_url) if settings.smtp_url else None
        self._ssl_context = ssl_context
        self._clock = clock or SystemClock()
        self._timeout = timeout
        _check_one_line("from", self.sender)

    def __repr__(self) -> str:
        where = f"smtp {self.target.where}" if self.target else f"outbox {self.outbox_dir}"
        return f"<Mailer {where}>"

    async def send(
        self, *, to: str, subject: str, text: str, html: str | None = None
    ) -> dict[str, Any]:
        """Send one message; ``InvalidRequest``: a bad address or header; ``DeliveryFailed``: it
        did not leave (SMTP refused or unreachable, outbox not writable)."""
        now_ms = self._clock.now_ms()
        msg = build_message(
            sender=self.sender, to=to, subject=subject, text=text, html=html, now_ms=now_ms
        )
        message_id = str(msg["Message-ID"])
        if self.target is None:
            try:
                path = await asyncio.to_thread(_write_outbox, self.outbox_dir, msg, now_ms)
            except OSError as exc:
                raise errors.DeliveryFailed(
                    f"writing the message to the outbox {self.outbox_dir} failed: {exc}",
                    details={"transport": "outbox"},
                ) from exc
            # The path in the message itself: the console's format shows no extras, and with
            # no SMTP server the file is where the person reads their mail.
            log.info(
                "mail written to the outbox: %s",
                path,
                extra={"action": "mail_written", "message_id": message_id, "path": str(path)},
            )
            return {
                "status": "written",
                "transport": "outbox",
                "path": str(path),
                "message_id": message_id,
            }
        target = self.target
        try:
            await asyncio.to_thread(_deliver, target, msg, self._ssl_context, self._timeout)
        except (smtplib.SMTPException, OSError) as exc:
            detail = f"{type(exc).__name__}: {exc}"
            if target.password:
                detail = detail.replace(target.password, "***")
            log.warning(
                "mail delivery failed",
                extra={"action": "mail_failed", "message_id": message_id, "smtp": target.where},
            )
            # ``from None``: the original exception (and its traceback) is not kept, so nothing
            # the SMTP library put in it can reach a log.
            raise errors.DeliveryFailed(
                f"SMTP delivery to {target.where} failed: {detail}",
                details={"transport": "smtp"},
            ) from None
        log.info(
            "mail sent",
            extra={"action": "mail_sent", "message_id": message_id, "smtp": target.where},
        )
        return {"status": "sent", "transport": "smtp", "message_id": message_id}


def _deliver(
    target: SmtpTarget, msg: EmailMessage, context: ssl.SSLContext | None, timeout: float
) -> None:
    context = context or ssl.create_default_context()
    smtp: smtplib.SMTP
    if target.security == "tls":
        smtp = smtplib.SMTP_SSL(target.host, target.port, timeout=timeout, context=context)
    else:
        smtp = smtplib.SMTP(target.host, target.port, timeout=timeout)
    with smtp:
        if target.security == "starttls":
            smtp.starttls(context=context)
        if target.username or target.password:
            smtp.login(target.username, target.password)
        smtp.send_message(msg)


def _write_outbox(outbox: Path, msg: EmailMessage, now_ms: int) -> Path:
    outbox.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(outbox, 0o700)  # mkdir's mode is masked by the umask and skipped if it existed
    # Zero-padded epoch ms first: names sort by time.
    name = f"{now_ms:016d}-{secrets.token_hex(4)}.eml"
    fd, tmp = tempfile.mkstemp(dir=outbox, prefix=".tmp-", suffix=".eml")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(msg.as_bytes())
            f.flush()
            os.fsync(f.fileno())
        final = outbox / name
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final
