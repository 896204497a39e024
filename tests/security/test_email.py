"""``$.send.email`` abuse (issue 25): an account set its e-mail to any outside address and one
run put 200 messages to it in the outbox, from the operator's mail identity. Now mail goes
only to an address the account proved its own (a link sent there), at most
``SLUICE_EMAIL_MAX_PER_HOUR`` an hour, and a refused send says why.

Before the change: the unverified address got every message (the first test's send was
``written``), and there was no verification route.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from email import policy
from email.parser import BytesParser
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.api.app import serving
from sluice.platform import Platform
from tests.conftest import Api, account_client, make_settings

SENDER = (
    "export default defineComponent({ async run({ steps, $ }) {"
    " for (let i = 0; i < (steps.trigger.event.n ?? 1); i++)"
    " $.send.email({ subject: `hello ${i}`, text: 'spam' }); } });"
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mail_platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    settings = make_settings(tmp_path_factory.mktemp("mail"), email_max_per_hour=3)
    async with Platform.open(settings, background=False) as platform:
        yield platform


@pytest_asyncio.fixture(loop_scope="session")
async def sender(mail_platform: Platform) -> AsyncIterator[Api]:
    name = f"sender-{secrets.token_hex(3)}"
    async with account_client(mail_platform, name, f"{name}@example.com") as a:
        yield a


def _outbox(platform: Platform, to: str) -> list[Any]:
    found = []
    for path in sorted(platform.settings.outbox_dir.glob("*.eml")):
        msg = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
        if msg["To"] == to:
            found.append(msg)
    return found


async def _send(api: Api, n: int) -> list[dict[str, Any]]:
    body = {
        "name": "mailer",
        "trigger": {"type": "manual"},
        "steps": [{"name": "s", "code": SENDER}],
    }
    made = await api.client.post("/v1/workflows", json=body)
    assert made.status_code == 200, made.text
    ran = await api.client.post(
        f"/v1/workflows/{made.json()['data']['id']}/runs", json={"event": {"n": n}}
    )
    assert ran.status_code == 200, ran.text
    run_id = ran.json()["data"]["id"]
    await api.platform.jobs.drain()
    got = await api.client.get(f"/v1/runs/{run_id}")
    assert got.status_code == 200, got.text
    sends: list[dict[str, Any]] = got.json()["data"]["sends"]
    return sends


async def test_mail_goes_only_to_a_verified_address_at_a_bounded_rate(
    sender: Api, mail_platform: Platform
) -> None:
    outside = f"victim-{secrets.token_hex(3)}@elsewhere.test"
    changed = await sender.client.put("/v1/users/me", json={"email": outside})
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["email_verified"] is False

    [refused] = await _send(sender, 1)
    assert refused["status"] == "failed", refused
    assert "not verified" in refused["outcome"]["error"]
    assert refused["outcome"]["code"] == "email_refused"
    assert _outbox(mail_platform, outside) == []

    # The link goes to the address; a second one within the minute is refused.
    asked = await sender.client.post("/v1/users/me/email/verification")
    assert asked.status_code == 202, asked.text
    again = await sender.client.post("/v1/users/me/email/verification")
    assert again.status_code == 429, again.text
    [mail] = _outbox(mail_platform, outside)
    link = re.search(r"https?://\S+/v1/email/verify\?token=\S+", mail.get_content())
    assert link is not None
    path = link.group(0).split("://", 1)[1].split("/", 1)[1]
    app = serving(mail_platform)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://sluice.test"
    ) as browser:
        bad = await browser.get("/v1/email/verify", params={"token": "v1.1.AAAA"})
        assert bad.status_code == 400, bad.text
        followed = await browser.get("/" + path)
    assert followed.status_code == 200, followed.text
    assert followed.json()["data"]["email_verified"] is True

    # Verified: it sends, up to the hourly rate; past it the send says why.
    sends = await _send(sender, 5)
    statuses = [s["status"] for s in sends]
    assert statuses[:3] == ["written"] * 3, sends
    assert all(s["status"] == "failed" for s in sends[3:]), sends
    assert "SLUICE_EMAIL_MAX_PER_HOUR" in sends[3]["outcome"]["error"]
    assert len(_outbox(mail_platform, outside)) == 1 + 3

    # A new address is unverified again.
    newer = await sender.client.put("/v1/users/me", json={"email": f"x-{outside}"})
    assert newer.json()["data"]["email_verified"] is False
