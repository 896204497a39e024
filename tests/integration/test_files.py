"""Bodies and uploaded files endpoints keep behind URLs (``x-pd-upload-body``, multipart file
parts; ``engine/runs/files.py``), over real HTTP on both dialects: the event's URLs, the bytes they
serve, who may read them, the limits, the storage quota and the expiry."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sluice.clock import FakeClock
from sluice.engine.runs.files import Files, NewFile
from tests.conftest import Api
from tests.integration.test_api_basics import assert_error
from tests.integration.test_ingress import EMITTER, deploy, emitted
from tests.integration.test_public_url import live_server

#: Over the endpoint's 512 KB body limit (Pipedream's too).
BIG = os.urandom(1_500_000)


@pytest.fixture
def quota_mb(api: Api) -> Iterator[Any]:
    """Lets a test lower the storage quota; restored afterwards."""
    quota = api.platform.commit.quota
    saved = quota.quota_bytes

    def lower(mb: int) -> None:
        quota.quota_bytes = mb << 20

    yield lower
    quota.quota_bytes = saved
    quota._over.pop(api.account_id, None)


async def test_upload_body_stores_a_large_body_behind_a_url(api: Api) -> None:
    source_id, path = await deploy(api, EMITTER)
    assert len(BIG) > api.platform.settings.http_max_body_bytes
    async with live_server(api.platform) as base, httpx.AsyncClient(timeout=60) as client:
        plain = await client.post(base + path, content=BIG)
        body = assert_error(plain, 413, "payload_too_large")
        assert "x-pd-upload-body" in body["error"]  # the way to send it

        sent = await client.post(
            base + path + "/in",
            content=BIG,
            headers={"x-pd-upload-body": "1", "content-type": "application/pdf"},
        )
        assert sent.status_code == 200, sent.text
        by_query = await client.post(
            base + path, params={"pipedream_upload_body": "1"}, content=b'{"name": "Yoda"}'
        )
        assert by_query.status_code == 200, by_query.text
        await api.platform.jobs.drain()
        both = await emitted(api, source_id)  # two jobs: in either order
        [large] = [e for e in both if e["path"] == "/in"]
        [small] = [e for e in both if e["path"] == "/"]
        assert large["path"] == "/in" and large["bodyRaw"] == ""
        assert set(large["body"]) == {"raw_body_url"}
        url = large["body"]["raw_body_url"]
        assert url.startswith(base + "/files/fl_")

        got = await client.get(url)  # no API key: the URL's secret is the credential
        assert got.status_code == 200
        assert hashlib.sha256(got.content).digest() == hashlib.sha256(BIG).digest()
        assert got.headers["content-type"] == "application/pdf"
        assert got.headers["content-disposition"] == "attachment"
        assert got.headers["x-content-type-options"] == "nosniff"
        head = await client.head(url)
        assert head.status_code == 200 and head.headers["content-length"] == str(len(BIG))

        small_body = await client.get(small["body"]["raw_body_url"])
        assert small_body.content == b'{"name": "Yoda"}'
        # A small body too: the flag stores whatever came, as on Pipedream; no type sent: bytes.
        assert small_body.headers["content-type"] == "application/octet-stream"

        # Another file's secret, a changed secret, an unknown id: all the same 404.
        file_id, secret = url.rsplit("/", 2)[1:]
        other_id = small["body"]["raw_body_url"].rsplit("/", 2)[1]
        for wrong in (
            f"{base}/files/{file_id}/{secret[:-1]}{'a' if secret[-1] != 'a' else 'b'}",
            f"{base}/files/{other_id}/{secret}",
            f"{base}/files/fl_nope/{secret}",
        ):
            assert_error(await client.get(wrong), 404, "not_found")


async def test_upload_limit_and_quota(api: Api, quota_mb: Any) -> None:
    _, path = await deploy(api, EMITTER)
    ingress = api.platform.ingress
    saved = ingress.limits
    upload = {"x-pd-upload-body": "1"}
    async with live_server(api.platform) as base, httpx.AsyncClient(timeout=60) as client:
        try:
            ingress.limits = type(saved)(**{**vars(saved), "max_upload_bytes": 1_000_000})
            over = await client.post(base + path, content=BIG, headers=upload)
            body = assert_error(over, 413, "payload_too_large")
            assert "SLUICE_HTTP_MAX_UPLOAD_BYTES" in body["error"]
        finally:
            ingress.limits = saved
        # Stored files count against the storage quota: the first fills it, the next is 507.
        quota_mb(1)
        assert (await client.post(base + path, content=BIG, headers=upload)).status_code == 200
        full = await client.post(base + path, content=BIG, headers=upload)
        assert_error(full, 507, "storage_quota_exceeded")


MULTIPART_FILE = os.urandom(700_000)


async def test_multipart_file_parts_become_urls(api: Api, other_api: Api) -> None:
    source_id, path = await deploy(api, EMITTER)
    async with live_server(api.platform) as base, httpx.AsyncClient(timeout=60) as client:
        sent = await client.post(
            base + path,
            data={"title": "General"},
            files={"image": ("my image.png", MULTIPART_FILE, "image/png")},
        )
        assert sent.status_code == 200, sent.text  # over 512 KB: the file is not in the event
        fields_only = await client.post(base + path, data={"name": "Leia"}, files={"x": b""})
        assert fields_only.status_code == 200
        await api.platform.jobs.drain()
        # Two jobs: they may run in either order.
        both = await emitted(api, source_id)
        [event] = [e for e in both if "title" in e["body"]]
        [empty_file] = [e for e in both if "name" in e["body"]]
        assert event["bodyRaw"] == ""
        assert event["body"]["title"] == "General"
        image = event["body"]["image"]
        assert {k: image[k] for k in ("filename", "mimetype", "size")} == {
            "filename": "my image.png",
            "mimetype": "image/png",
            "size": len(MULTIPART_FILE),
        }
        got = await client.get(image["url"])
        assert got.status_code == 200 and got.content == MULTIPART_FILE
        assert got.headers["content-type"] == "image/png"
        assert "filename*=UTF-8''my%20image.png" in got.headers["content-disposition"]
        assert empty_file["body"]["name"] == "Leia"
        assert (await client.get(empty_file["body"]["x"]["url"])).content == b""

        # The form's fields are still held to the endpoint's limit (files are not).
        huge_field = "x" * (api.platform.settings.http_max_body_bytes + 1)
        over = await client.post(base + path, data={"f": huge_field}, files={"a": b"1"})
        assert_error(over, 413, "payload_too_large")

    # The file belongs to the account: the other account's API key reads nothing more.
    listed = await other_api.client.get(f"/v1/sources/{source_id}/event_summaries")
    assert listed.status_code == 404


async def test_files_expire(api: Api) -> None:
    clock = FakeClock(api.platform.clock.now_ms())
    files = Files(api.platform.db, api.platform.commit, 1800, clock)
    [url] = await files.store(api.account_id, [NewFile(b"abc", "text/plain")], "http://s")
    file_id, secret = url.rsplit("/", 2)[1:]
    meta, data = await files.read(file_id, secret)
    assert data == b"abc" and meta.mimetype == "text/plain" and meta.size == 3
    clock.advance(seconds=1799)
    assert (await files.read(file_id, secret))[1] == b"abc"
    clock.advance(seconds=1)
    with pytest.raises(Exception, match="expired"):
        await files.read(file_id, secret)
    # The next store of the account deletes it.
    await files.store(api.account_id, [NewFile(b"d", "text/plain")], "http://s")
    async with api.platform.db.connect() as conn:
        from sluice.storage import files as store

        gone = await conn.run_sync(lambda c: store.get_sync(c, file_id, 0))
    assert gone is None
