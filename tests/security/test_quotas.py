"""Quotas (issue 25): one account storing without bound made another tenant's runs slower (136
MB in 10 s). Now what an account keeps stored (events, runs, logs, db, data stores) is counted
as it is written, shown in ``GET /v1/users/me``, and past ``SLUICE_STORAGE_QUOTA_MB`` its runs
store nothing but why (``STORAGE_QUOTA``), its endpoints answer 507 ``storage_quota_exceeded``
and its data store writes are refused; other accounts carry on.

Before the change: no figure in ``/v1/users/me`` and every write was taken.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import smtplib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.api.app import serving
from sluice.platform import Platform
from tests.conftest import Api, account_client, make_settings
from tests.integration.test_mail_in import DOMAIN, listener, message, send

#: Each run emits one event of about 300 KB: four of them pass a 1 MB quota.
FILLER = """
export default { name: "Filler", version: "1",
  props: { http: "$.interface.http" },
  async run(event) { this.$emit({ blob: "x".repeat(300 * 1024), n: event?.body?.n ?? null }); } };
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def quota_platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    data_dir = tmp_path_factory.mktemp("quotas")
    # An npm store of its own: its installs are this module's (owners, sizes, uid).
    settings = make_settings(
        data_dir, storage_quota_mb=1, npm_quota_mb=1, npm_store=str(data_dir / "npm-store")
    )
    async with Platform.open(settings, background=False) as platform:
        yield platform


async def _account(platform: Platform) -> AsyncIterator[Api]:
    name = f"filler-{secrets.token_hex(3)}"
    async with account_client(platform, name, f"{name}@example.com") as a:
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def filler(quota_platform: Platform) -> AsyncIterator[Api]:
    async for a in _account(quota_platform):
        yield a


@pytest_asyncio.fixture(loop_scope="session")
async def neighbour(quota_platform: Platform) -> AsyncIterator[Api]:
    async for a in _account(quota_platform):
        yield a


async def _me(api: Api) -> dict[str, Any]:
    me = await api.client.get("/v1/users/me")
    assert me.status_code == 200, me.text
    quotas: dict[str, Any] = me.json()["data"]["quotas"]
    return quotas


async def _run(api: Api, source_id: str) -> dict[str, Any]:
    ran = await api.client.post(f"/v1/sources/{source_id}/run", json={"event": {}})
    assert ran.status_code == 200, ran.text
    data: dict[str, Any] = ran.json()["data"]
    return data


async def test_an_account_at_its_storage_quota_stores_nothing_more(
    filler: Api, neighbour: Api, quota_platform: Platform
) -> None:
    made = await filler.client.post("/v1/sources", json={"component_code": FILLER})
    assert made.status_code == 200, made.text
    source = made.json()["data"]
    assert (await _me(filler))["stored_bytes"] == 0
    assert (await _me(filler))["storage_quota_bytes"] == 1 << 20
    for _ in range(4):
        assert (await _run(filler, source["id"]))["ok"]
    used = (await _me(filler))["stored_bytes"]
    assert used >= 4 * 300 * 1024, used

    # Over the quota: the run stores nothing but why.
    refused = await _run(filler, source["id"])
    assert refused["ok"] is False
    assert refused["error"]["code"] == "STORAGE_QUOTA", refused
    events = await filler.client.get(f"/v1/sources/{source['id']}/event_summaries")
    assert len(events.json()["data"]) == 4
    assert (await _me(filler))["stored_bytes"] < used + 4096

    # Its endpoint refuses before reading the body; its data store writes are refused.
    app = serving(quota_platform)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://sluice.test"
    ) as public:
        path = "/e/" + source["endpoint_url"].rstrip("/").rsplit("/", 1)[1]
        answer = await public.post(path, json={"n": 1})
    assert answer.status_code == 507, answer.text
    assert answer.json()["code"] == "storage_quota_exceeded"
    store = await filler.client.post("/v1/data_stores", json={"name": "s"})
    assert store.status_code == 200, store.text
    put = await filler.client.put("/v1/data_stores/s/records/k", json={"value": "v"})
    assert put.status_code == 507, put.text
    assert put.json()["code"] == "storage_quota_exceeded"
    # Mail to its e-mail source is refused too (552), before the message is sent.
    settings = dataclasses.replace(quota_platform.settings, email_domain=DOMAIN)
    inbox = await filler.client.post("/v1/sources", json={"component_key": "email-new-messages"})
    assert inbox.status_code == 200, inbox.text
    address = f"{inbox.json()['data']['id']}@{DOMAIN}"
    async with listener(quota_platform, settings) as mail:
        with pytest.raises(smtplib.SMTPRecipientsRefused) as caught:
            await asyncio.to_thread(send, mail.port, message(address), [address])
    assert caught.value.recipients[address][0] == 552

    # Another account is untouched.
    theirs = await neighbour.client.post("/v1/sources", json={"component_code": FILLER})
    assert (await _run(neighbour, theirs.json()["data"]["id"]))["ok"]


@pytest.mark.npm
async def test_an_accounts_npm_dependencies_stay_within_its_share_of_the_store(
    filler: Api, neighbour: Api
) -> None:
    """The npm store grew 470 MB in 33 s from four concurrent saves: now each account's sets
    count against SLUICE_NPM_QUOTA_MB, and one account's installs run one at a time."""
    small = (
        'import isOdd from "is-odd@3.0.1";\n'
        'export default { name: "Small", version: "1", type: "action",'
        " async run() { return isOdd(3); } };"
    )
    saved = await filler.client.post("/v1/components", json={"component_code": small})
    assert saved.status_code == 200, saved.text
    used = (await _me(filler))["npm_bytes"]
    assert 0 < used < 1 << 20, used
    large = (
        'import _ from "lodash@4.17.21";\n'
        'export default { name: "Large", version: "1", type: "action",'
        " async run() { return _.VERSION; } };"
    )
    refused = await filler.client.post("/v1/components", json={"component_code": large})
    assert refused.status_code == 507, refused.text
    assert refused.json()["code"] == "npm_quota_exceeded"
    assert (await _me(filler))["npm_bytes"] == used
    # Another account's share is its own.
    assert (await _me(neighbour))["npm_bytes"] == 0
