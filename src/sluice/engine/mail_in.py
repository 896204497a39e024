"""Inbound mail: an SMTP listener (aiosmtpd's protocol on this process's event loop) for the
``email-new-messages`` sources, on ``SLUICE_SMTP_INBOUND_PORT`` (off unless set).

Each such source has the address ``<source id>@<domain>`` (``SLUICE_EMAIL_DOMAIN``). A
recipient is accepted only when it names an active e-mail source (anything else: ``550``), and a
message only up to ``SLUICE_SMTP_INBOUND_MAX_BYTES`` (``552``, by the protocol's size limit).
As an endpoint's requests, mail to an account over its storage quota is refused (``552``), and
while the account is shed or the disk is at its reserve it is deferred (``451``).
The message is parsed into the event (``domain/email_messages.py``) and stored as one ``email``
job per recipient source; only once that is committed is it answered ``250``, so an accepted
message is never lost. A store that fails answers ``451``: the sender tries again later.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from sluice import errors
from sluice.config import Settings
from sluice.domain import email_messages
from sluice.domain.states import JobKind
from sluice.engine.queue.admission import Admission
from sluice.engine.queue.enqueuer import Enqueuer
from sluice.engine.queue.jobs import JobWorker
from sluice.engine.state.quotas import StorageQuota
from sluice.storage import database, sources
from sluice.storage.jobs import NewJob

log = logging.getLogger(__name__)

#: Recipients one message may have (each is one stored event).
MAX_RECIPIENTS = 50


class MailIn:
    """The listener, an async context manager; ``port``: the one bound (when the setting is 0
    in tests, the system's pick)."""

    def __init__(
        self,
        settings: Settings,
        reader: database.Reader,
        enqueuer: Enqueuer,
        worker: JobWorker,
        *,
        admission: Admission,
        quota: StorageQuota,
        port: int | None = None,
    ) -> None:
        self.host = settings.smtp_inbound_host
        self.port = settings.smtp_inbound_port if port is None else port
        self.domain = settings.resolved_email_domain
        self.max_bytes = settings.smtp_inbound_max_bytes
        self.reader = reader
        self.enqueuer = enqueuer
        self.worker = worker
        #: As an endpoint's request: refused while the account is shed or over its quota.
        self.admission = admission
        self.quota = quota
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> MailIn:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info(
            "inbound mail listening",
            extra={"action": "mail_in_listen", "port": self.port, "domain": self.domain},
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _protocol(self) -> SMTP:
        return SMTP(
            self,
            data_size_limit=self.max_bytes,
            hostname=self.domain,
            ident="Sluice",
            timeout=60,
        )

    async def _owner(self, address: str) -> tuple[str, str] | None:
        """(owner id, source id) of an address that names an active e-mail source."""
        source_id = email_messages.source_of(address, self.domain)
        if source_id is None:
            return None
        found = await self.reader(lambda conn: sources.mail_target_sync(conn, source_id))
        if found is None:
            return None
        owner_id, active, key = found
        return (owner_id, source_id) if active and key == email_messages.SOURCE_KEY else None

    # ---- aiosmtpd's handler hooks -------------------------------------------------------------

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        try:
            target = await self._owner(address)
        except Exception:
            log.warning("inbound mail: a recipient could not be looked up", exc_info=True)
            return "451 4.3.0 Try again later"
        if target is None:
            return "550 5.1.1 No such address here"
        try:
            self.admission.check(target[0])
            self.admission.take(target[0])  # the message is queued as a job
            self.quota.check(target[0])
        except errors.StorageQuotaExceeded:
            return "552 5.2.2 The account's storage is full"
        except errors.SluiceError:  # shed, or the disk at its reserve: later
            return "451 4.3.2 Try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        if len(raw) > self.max_bytes:
            return "552 5.3.4 Message too big"
        rcpt_tos = [str(a) for a in envelope.rcpt_tos]
        try:
            event: dict[str, Any] = email_messages.event_of(
                raw, str(envelope.mail_from or ""), rcpt_tos
            )
            stored = []
            for address in rcpt_tos:
                target = await self._owner(address)
                if target is None:  # deleted or deactivated since RCPT: not delivered
                    continue
                owner_id, source_id = target
                await self.enqueuer.enqueue(NewJob(JobKind.EMAIL, owner_id, source_id, event))
                stored.append((owner_id, source_id))
        except Exception:
            log.warning("inbound mail: a message could not be stored", exc_info=True)
            return "451 4.3.0 Try again later"
        # Committed: the message is durable from here on, and only now is it answered.
        for owner_id, source_id in stored:
            self.worker.notify(owner_id, due_now=True)
            log.info(
                "mail received",
                extra={"action": "mail_in", "source_id": source_id, "bytes": len(raw)},
            )
        return "250 2.0.0 Message stored"
