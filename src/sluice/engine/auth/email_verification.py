"""Verified e-mail addresses (issue 25): ``$.send.email`` sends only to the account's address
once the account has proven it is its own, by following a link sent there.

The link carries a token sealed with the server's key (``crypto.Cipher``, bound to its purpose):
the account, the address and an expiry. Nothing is stored until it is followed; following it
marks the address verified if the account still has that address. Changing the address
(``PUT /v1/users/me``) makes it unverified again. One link per account per
``LINK_INTERVAL_S`` at most (the mail throttle's slots), so the link itself cannot be used to
flood an outside address.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from sluice import errors
from sluice.clock import Clock
from sluice.config import Settings
from sluice.crypto import Cipher
from sluice.domain.accounts import Account
from sluice.engine.outbound.mailer import Mailer
from sluice.engine.state.commit import Commit
from sluice.storage import accounts, runs

log = logging.getLogger(__name__)

#: The token's purpose, sealed with it: a token of another purpose never verifies.
_AAD = "email-verification"
#: A link is good for this long, ms.
LINK_TTL_MS = 24 * 3600 * 1000
#: One verification mail per account per this many seconds.
LINK_INTERVAL_S = 60
#: The path the link opens (``api/users.py``).
VERIFY_PATH = "/v1/email/verify"


class EmailVerification:
    def __init__(
        self,
        db: AsyncEngine,
        cipher: Cipher,
        mailer: Mailer,
        settings: Settings,
        clock: Clock,
        commit: Commit,
    ) -> None:
        self.db, self.cipher, self.mailer = db, cipher, mailer
        self.settings, self.clock, self.commit = settings, clock, commit

    async def request(self, account: Account, base_url: str) -> str:
        """Mail a verification link to the account's address; the address."""
        email = account.email
        if not email:
            raise errors.InvalidRequest(
                "this account has no e-mail address: set one first (PUT /v1/users/me)",
                field="email",
            )
        if account.email_verified:
            raise errors.Conflict(f"{email} is verified already")
        now_ms = self.clock.now_ms()
        window_ms = LINK_INTERVAL_S * 1000

        def claim(conn: Connection) -> bool:
            return runs.claim_mail_slot_sync(
                conn, account.id, "verify-email", now_ms=now_ms, window_ms=window_ms
            )

        if not await self.commit.write(claim):
            raise errors.RateLimited(
                f"a verification link went to this account less than {LINK_INTERVAL_S} s ago",
                retry_after_seconds=LINK_INTERVAL_S,
            )
        sealed = json.dumps({"a": account.id, "e": email, "x": now_ms + LINK_TTL_MS})
        token = self.cipher.encrypt(sealed, _AAD)
        link = f"{base_url.rstrip('/')}{VERIFY_PATH}?token={token}"
        text = (
            f"Someone (probably you) asked to send mail from Sluice account {account.username} "
            f"to this address.\n\nTo allow it, open this link within 24 hours:\n\n{link}\n\n"
            "If it was not you, ignore this message: nothing will be sent here.\n"
        )
        await self.mailer.send(to=email, subject="[Sluice] Verify your e-mail address", text=text)
        log.info(
            "e-mail verification link sent",
            extra={"action": "email_verification", "owner_id": account.id},
        )
        return email

    async def confirm(self, token: str) -> Account:
        """Follow a link: the account with its address verified."""
        claims = self._open(token)
        if int(claims.get("x", 0)) < self.clock.now_ms():
            raise errors.InvalidRequest("this verification link has expired: ask for a new one")
        account_id, email = str(claims.get("a")), str(claims.get("e"))
        async with self.db.begin() as conn:
            if not await accounts.mark_verified(conn, account_id, email):
                raise errors.Conflict(
                    "the account's address changed since this link was sent: ask for a new one"
                )
            found = await accounts.get(conn, account_id)
        assert found is not None
        return found

    def _open(self, token: str) -> dict[str, Any]:
        try:
            claims = json.loads(self.cipher.decrypt(token, _AAD))
        except (errors.InternalError, ValueError) as exc:
            raise errors.InvalidRequest("this verification link is not valid") from exc
        if not isinstance(claims, dict):
            raise errors.InvalidRequest("this verification link is not valid")
        return claims
