"""``send`` jobs: one ``$.send.http``, ``$.send.email`` or ``$.send.s3`` of a stored run,
performed after the run is stored, its outcome written into the run.

No retries (Pipedream: none for ``$.send.http``): a failure is an outcome, kept with the run.
``$.send.email`` with ``dedupe_key`` sends at most one message per key per
``error_email_throttle_seconds`` (the global error workflow's once-a-day rule).
``$.send.http`` obeys the egress policy (``SLUICE_EGRESS_ALLOW``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain.jobs import SendJob
from sluice.domain.states import SendStatus
from sluice.engine.outbound import destinations, http_clients, sealed
from sluice.engine.outbound.mailer import Mailer
from sluice.engine.queue.jobs import Finish
from sluice.engine.state.commit import Commit
from sluice.storage import runs
from sluice.storage.jobs import Job


class SendJobs:
    def __init__(
        self,
        db: AsyncEngine,
        cipher: Cipher,
        mailer: Mailer,
        settings: Settings,
        clock: Clock,
        commit: Commit,
        clients: http_clients.Clients | None = None,
    ) -> None:
        self.db = db
        self.cipher = cipher
        self.mailer = mailer
        self.settings = settings
        self.clock = clock
        #: The one writer of results (``engine/state/commit.py``).
        self.commit = commit
        #: Parsed once: a bad SLUICE_EGRESS_ALLOW fails at start, not at the first send.
        self.egress = http_clients.policy(settings)
        #: The process's shared clients (None: a client per send).
        self.clients = clients

    async def __call__(self, job: Job, finish: Finish) -> None:
        sending = SendJob.of(job.payload)
        run_id, idx = sending.run_id, sending.idx
        async with self.db.connect() as conn:
            send = await runs.get_send(conn, run_id, idx)
            email, verified = await runs.account_email(conn, job.owner_id)
        if send is None or send["status"] != SendStatus.QUEUED:
            return  # the run was trimmed or deleted, or the send was done already
        config = sealed.unseal(self.cipher, send["config"], run_id, idx)
        now_ms = self.clock.now_ms()
        try:
            if send["type"] == "http":
                outcome = await destinations.send_http(
                    config,
                    time_limit=self.settings.send_http_timeout_seconds,
                    policy=self.egress,
                    client=self.clients.get(self.egress) if self.clients else None,
                )
            elif send["type"] == "s3":
                outcome = await destinations.send_s3(self.settings, config, now_ms=now_ms)
            else:
                outcome = await self._email(
                    job.owner_id, email, verified, config, now_ms, (run_id, idx)
                )
        except errors.InvalidSend as exc:
            outcome = {"status": "failed", "error": exc.message}
        await self.commit.send_outcome(run_id, idx, outcome, finish)

    async def _email(
        self,
        owner_id: str,
        to: str | None,
        verified: bool,
        config: dict[str, Any],
        now_ms: int,
        send: tuple[str, int],
    ) -> dict[str, Any]:
        """Send one e-mail to the account's verified address, within its hourly rate, unless
        its ``dedupe_key`` sent one within the throttle window (a failed send frees the window
        again)."""
        refused = await self._email_refused(owner_id, to, verified, now_ms, send)
        if refused is not None:
            return {"status": "failed", "code": errors.EmailRefused.code, "error": refused}
        key = config.get("dedupe_key")
        slot = f"email:{key}" if key is not None else None
        throttle_s = self.settings.error_email_throttle_seconds
        if slot is not None:
            window_ms = throttle_s * 1000

            def claim(conn: Connection) -> bool:
                return runs.claim_mail_slot_sync(
                    conn, owner_id, slot, now_ms=now_ms, window_ms=window_ms
                )

            if not await self.commit.write(claim):
                reason = f"an e-mail for {key!r} went out less than {throttle_s} s ago"
                return {"status": "skipped", "reason": reason}
        mail = {k: v for k, v in config.items() if k in ("subject", "text", "html")}
        outcome = await destinations.send_email(self.mailer, to=to, config=mail)
        if slot is not None and outcome.get("status") == "failed":
            await self.commit.write(
                lambda conn: runs.release_mail_slot_sync(conn, owner_id, slot, now_ms)
            )
        return outcome

    async def _email_refused(
        self, owner_id: str, to: str | None, verified: bool, now_ms: int, send: tuple[str, int]
    ) -> str | None:
        """Why ``$.send.email`` may not send now (None: it may): Sluice's mail identity goes
        only to an address the account proved its own, at a bounded rate (issue 25)."""
        if to is not None and not verified:
            return (
                f"the account's address {to} is not verified: $.send.email sends only to a "
                "verified address (POST /v1/users/me/email/verification, or `sluice email "
                "verify`, mails it a link)"
            )
        limit = self.settings.email_max_per_hour
        if limit <= 0:
            return None

        def reserve(conn: Connection) -> int | None:
            return runs.reserve_email_sync(
                conn, owner_id, send[0], send[1], now_ms=now_ms, limit=limit
            )

        sent = await self.commit.write(reserve)
        if sent is not None:
            return (
                f"this account sent {sent} e-mails in the last hour, its limit "
                f"(SLUICE_EMAIL_MAX_PER_HOUR={limit}): this one was not sent"
            )
        return None
