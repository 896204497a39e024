"""Proof on real components: published, unmodified files from @pipedream/* npm packages.

The packages are fetched with ``npm pack`` (nothing is committed) and each component is sent
through the real API as Pipedream's registry lays it out: the entry file, the files it imports
by relative path, and the package's package.json. Sluice installs what they import (declared or
not) and runs them in real Node. No CommonJS component is published in any @pipedream package
on npm (all are .mjs), so CommonJS is proven on a legacy-style fixture (tests/e2e/fixtures).
"""

from __future__ import annotations

import fcntl
import json
import posixpath
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sluice.api.app import serving
from sluice.domain import imports
from sluice.platform import Platform
from tests.conftest import CACHE, make_settings
from tests.integration.test_destinations import HttpServer, http_server

pytestmark = pytest.mark.npm

PACKAGES = {"helper_functions": "0.3.13", "slack": "0.10.3", "data_stores": "0.1.11"}
FIXTURES = Path(__file__).parent / "fixtures"


def _unpack(name: str, version: str) -> Path:
    target = CACHE / "pd-packages" / f"{name}-{version}"
    target.parent.mkdir(parents=True, exist_ok=True)
    # One unpacker at a time across processes (two test runs on one machine); the package is
    # packed and unpacked aside and renamed into place whole.
    with open(target.parent / f"{name}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "package" / "package.json").exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{name}-{version}-", dir=target.parent))
            subprocess.run(
                [
                    "npm",
                    "pack",
                    f"@pipedream/{name}@{version}",
                    "--pack-destination",
                    str(aside),
                    "--silent",
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            (tarball,) = aside.glob("*.tgz")
            with tarfile.open(tarball) as archive:
                archive.extractall(aside, filter="data")
            shutil.rmtree(target, ignore_errors=True)
            aside.rename(target)
    return target / "package"


def component_files(root: Path, entry: str) -> dict[str, Any]:
    """The entry, every file it reaches by relative import, and the nearest package.json."""
    files: dict[str, str] = {}
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        text = (root / path).read_text()
        files[path] = text
        for ref in imports.find_imports(text):
            if ref.specifier.startswith("."):
                todo.append(
                    posixpath.normpath(posixpath.join(posixpath.dirname(path), ref.specifier))
                )
    if (root / "package.json").exists():
        files["package.json"] = (root / "package.json").read_text()
    code = files.pop(entry)
    return {"component_code": code, "component_path": entry, "files": files}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[HttpServer]:
    """A loopback HTTP server the components may reach (the egress policy lists it)."""
    async with http_server() as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def client(
    tmp_path_factory: pytest.TempPathFactory, server: HttpServer
) -> AsyncIterator[httpx.AsyncClient]:
    # Registry components put defaults on required props (compare-arrays, random-integer):
    # the compatibility rules Pipedream's registry needs.
    settings = make_settings(
        tmp_path_factory.mktemp("real"),
        component_rules="pipedream",
        egress_allow=f"127.0.0.1:{server.port}",
    )
    async with Platform.open(settings) as platform:
        _account, key = await platform.create_account("proof")
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=serving(platform)),
            base_url="http://sluice.test",
            headers={"Authorization": f"Bearer {key}"},
            timeout=300,
        ) as c:
            yield c


@pytest.fixture(scope="module")
def packages() -> dict[str, Path]:
    return {name: _unpack(name, version) for name, version in PACKAGES.items()}


async def connect(client: httpx.AsyncClient, app: str, **credentials: str) -> dict[str, str]:
    response = await client.post("/v1/accounts", json={"app": app, "credentials": credentials})
    assert response.status_code == 200, response.text
    return {"authProvisionId": response.json()["data"]["id"]}


async def run_action(
    client: httpx.AsyncClient, root: Path, entry: str, props: dict[str, Any]
) -> dict[str, Any]:
    saved = await client.post("/v1/components", json=component_files(root, entry))
    assert saved.status_code == 200, saved.text
    assert saved.json()["data"]["component_type"] == "action"
    response = await client.post(
        "/v1/actions/run",
        json={"component_id": saved.json()["data"]["id"], "configured_props": props},
    )
    assert response.status_code == 200, response.text
    return response.json()["data"]


def action(slug: str) -> str:
    return f"actions/{slug}/{slug}.mjs"


async def test_helper_functions_actions(
    client: httpx.AsyncClient, packages: dict[str, Path]
) -> None:
    root = packages["helper_functions"]
    app = await connect(client, "helper_functions")

    decoded = await run_action(
        client,
        root,
        action("base64-decode-string"),
        {"helper_functions": app, "data": "SGVsbG8sIFNsdWljZSE="},
    )
    assert decoded["ok"], decoded
    assert decoded["exports"]["data"] == "Hello, Sluice!"

    exported = await run_action(
        client,
        root,
        action("export-variables"),
        {"helperFunctions": app, "config": '{"region":"eu","retries":3}'},
    )
    assert exported["exports"]["config"] == {"region": "eu", "retries": 3}
    # Text that is not JSON reaches run(), as on Pipedream: the component refuses it itself
    # (before issue 14 Sluice refused it first, with its own message).
    refused = await run_action(
        client,
        root,
        action("export-variables"),
        {"helperFunctions": app, "config": "{not json"},
    )
    assert refused["ok"] is False and refused["error"]["name"] == "ConfigurationError"
    assert "valid object" in refused["error"]["message"]

    xml = await run_action(
        client,
        root,
        action("xml-to-json"),
        {"helper_functions": app, "input": '<note id="7"><to>Tove</to><body>Hi</body></note>'},
    )
    assert xml["ret"] == {
        "note": {"_attributes": {"id": "7"}, "to": {"_text": "Tove"}, "body": {"_text": "Hi"}}
    }
    assert xml["summary"] == "Successfully converted XML to JSON"

    # Legacy export style: the action assigns a new key on `this` (via undeclared lodash.set).
    pretty = await run_action(
        client, root, action("prettify-json"), {"helper_functions": app, "val": '{"a":1}'}
    )
    assert pretty["ok"], pretty
    assert pretty["exports"]["prettifiedValue"]["val"] == '"{\\"a\\":1}"'
    # An object in its string prop reaches run() as the object (what it is meant for).
    pretty = await run_action(
        client, root, action("prettify-json"), {"helper_functions": app, "val": {"a": 1}}
    )
    assert pretty["exports"]["prettifiedValue"]["val"] == '{\n  "a": 1\n}'

    country = await run_action(
        client,
        root,
        action("get-coutry-name-by-code-iso"),
        {"helper_functions": app, "countryCode": "DE"},
    )
    assert country["ret"] == "Germany"

    # Needs integer coercion of "5": without it the sum concatenates strings.
    number = await run_action(
        client, root, action("random-integer"), {"helperFunctions": app, "min": "5", "max": "5"}
    )
    assert number["ret"] == 5

    compared = await run_action(
        client,
        root,
        action("compare-arrays"),
        {
            "helperFunctions": app,
            "array1": ["a", "b", "c"],
            "array2": ["b", "c", "d"],
            "actionType": "symmetric difference",
        },
    )
    assert compared["ok"], compared
    assert sorted(compared["ret"]) == ["a", "d"]

    # Imports slackify-html, which the package does not declare: found and installed.
    mrkdwn = await run_action(
        client,
        root,
        action("convert-html-to-slack-mrkdwn"),
        {
            "helper_functions": app,
            "html": '<p>Hello <b>bold</b> <i>it</i> <a href="https://example.com">ex</a></p>',
        },
    )
    assert mrkdwn["ret"] == "Hello *bold* _it_ <https://example.com|ex>"


async def test_more_helper_functions_actions(
    client: httpx.AsyncClient, packages: dict[str, Path]
) -> None:
    """The helper_functions actions that need no outside service, besides those above."""
    root = packages["helper_functions"]
    app = await connect(client, "helper_functions")

    async def run(slug: str, key: str = "helper_functions", **props: Any) -> dict[str, Any]:
        done = await run_action(client, root, action(slug), {key: app, **props})
        assert done["ok"], (slug, done)
        return done

    assert (await run("convert-object-to-json-string", object={"a": [1]}))["ret"] == '{"a":[1]}'
    delayed = await run("delay", ms="5")
    assert delayed["summary"] == "Workflow successfully delayed for 5 ms"
    formatted = await run("format-iso8601-datetime", iso8601="2024-03-05T14:07:09")
    assert formatted["ret"] == {
        "date_time": "03/05/2024 2:07:09 pm",
        "date": "03/05/2024",
        "time": "2:07:09 pm",
    }
    now_in = (await run("get-current-time-in-specific-timezone", timezone="Asia/Tokyo"))["ret"]
    assert now_in.endswith("+09:00"), now_in
    ago = (await run("get-iso-string-n-days-ago", days="3"))["exports"]["date"]
    assert ago.endswith("Z") and len(ago) == 24, ago
    at = await run(
        "get-time-in-specific-timezone", time="2024-01-01T12:00:00Z", timezone="Europe/Paris"
    )
    assert at["ret"] == "2024-01-01T13:00:00+01:00"
    # Its options pass undefined to Turndown when left out (the component's own code, the
    # same on Pipedream): a user sets the delimiters they need.
    markdown = await run(
        "html-to-markdown",
        input="<h1>Title</h1><p>Some <b>bold</b></p>",
        headingStyle="setext",
        strongDelimiter="**",
    )
    assert markdown["ret"] == "Title\n=====\n\nSome **bold**"
    picked = await run(
        "random-item-from-list", "helperFunctions", list=["a", "b", "c"], quantity="2"
    )
    assert len(picked["ret"]) == 2 and set(picked["ret"]) <= {"a", "b", "c"}, picked


async def test_helper_functions_actions_that_reach_out(
    client: httpx.AsyncClient, packages: dict[str, Path], server: HttpServer
) -> None:
    """Those that call a URL, pointed at a loopback server; the RSS ones as their code runs."""
    root = packages["helper_functions"]
    app = await connect(client, "helper_functions")
    sent = await run_action(
        client,
        root,
        action("send-http-request"),
        {"helperFunctions": app, "httpRequest": {"url": f"{server.url}/hook", "method": "POST"}},
    )
    assert sent["ok"] and sent["ret"]["status"] == 200, sent
    assert (server.received[-1].method, server.received[-1].target) == ("POST", "/hook")
    downloaded = await run_action(
        client,
        root,
        action("download-file-to-tmp"),
        {"helper_functions": app, "url": f"{server.url}/file.txt", "filename": "file.txt"},
    )
    assert downloaded["ok"] and downloaded["ret"] == ["file.txt", "/tmp/file.txt"], downloaded
    assert server.received[-1].target == "/file.txt"
    scheduled = await run_action(
        client,
        root,
        action("schedule-task-in-future"),
        {
            "helper_functions": app,
            "numSeconds": "60",
            "secret": "s3",
            "taskSchedulerURL": server.url,
            "message": "later",
        },
    )
    assert scheduled["ok"], scheduled
    asked = server.received[-1]
    # Its code sets no method: axios sends a GET with the JSON body (so on Pipedream too).
    assert (asked.method, asked.target, asked.headers["x-pd-secret"]) == ("GET", "/schedule", "s3")
    assert json.loads(asked.body) == {"timestamp": scheduled["exports"]["ts"], "message": "later"}
    # $.send.s3 is recorded with the run (no bucket configured here: its send fails, not the run).
    s3 = await run_action(
        client,
        root,
        action("send-to-s3"),
        {"helper_functions": app, "bucket": "b", "prefix": "p/", "payload": {"a": 1}},
    )
    assert s3["ok"], s3
    # Nodemailer opens a raw TCP socket: the sandbox has no way out but the egress proxy's
    # HTTP tunnels (docs/runtime.md, "Network egress"; a listed difference from Pipedream).
    mailed = await run_action(
        client,
        root,
        action("send-email-with-nodemailer"),
        {
            "helper_functions": app,
            "host": "127.0.0.1",
            "port": str(server.port),
            "secure": False,
            "ignoreTLS": True,
            "user": "ada",
            "pass": "secret",
            "from": "a@example.com",
            "to": "b@example.com",
            "subject": "hi",
            "text": "hello",
        },
    )
    assert mailed["ok"] is False, mailed
    assert any(code in json.dumps(mailed["error"]) for code in ("ECONNREFUSED", "ENETUNREACH"))
    # `for (url of this.rss_feeds)` assigns an undeclared variable: in an ES module (strict
    # mode, on Pipedream too) that throws before any feed is read.
    for slug in ("retrieve-all-rss-stories", "retrieve-new-rss-stories"):
        rss = await run_action(
            client, root, action(slug), {"helper_functions": app, "rss_feeds": [server.url]}
        )
        assert rss["ok"] is False and rss["error"]["name"] == "ReferenceError", rss
        assert "url is not defined" in rss["error"]["message"], rss


async def test_every_data_stores_action(
    client: httpx.AsyncClient, packages: dict[str, Path]
) -> None:
    """Each of @pipedream/data_stores' 13 actions, on two of the account's stores."""
    root = packages["data_stores"]
    for name in ("e2e-a", "e2e-b"):
        made = await client.post("/v1/data_stores", json={"name": name})
        assert made.status_code == 200, made.text
    await client.put("/v1/data_stores/e2e-b/records/only-b", json={"value": 1})

    async def run(slug: str, **props: Any) -> Any:
        done = await run_action(client, root, action(slug), props)
        assert done["ok"], (slug, done)
        return done["ret"]

    async def record(key: str) -> Any:
        found = await client.get(f"/v1/data_stores/e2e-a/records/{key}")
        return found.json()["data"]["value"] if found.status_code == 200 else None

    await run("add-update-record", dataStore="e2e-a", key="k1", value='{"n": 1}')
    assert await record("k1") == {"n": 1}
    # Its values are converted as its code does: "3" is the number 3.
    await run("add-update-multiple-records", dataStore="e2e-a", data={"k2": "v2", "k3": "3"})
    assert (await record("k2"), await record("k3")) == ("v2", 3)
    await run("append-to-record", dataStore="e2e-a", key="list", value="x")
    await run("append-to-record", dataStore="e2e-a", key="list", value='{"y": 2}')
    assert await record("list") == ["x", {"y": 2}]
    assert await run("get-record-or-create", dataStore="e2e-a", key="k1") == {"n": 1}
    created = await run(
        "get-record-or-create",
        dataStore="e2e-a",
        key="made",
        addRecordIfNotFound="Yes",
        value='"fresh"',
    )
    assert created == "fresh" and await record("made") == "fresh"
    had = await run(
        "has-key-or-create", dataStore="e2e-a", key="had", addRecordIfNotFound="Yes", value="7"
    )
    assert had == {"existingKeyFound": False, "newKeyCreated": True, "value": 7, "ttl": None}
    assert await record("had") == 7
    again = await run("has-key-or-create", dataStore="e2e-a", key="had")
    assert again == {"existingKeyFound": True, "newKeyCreated": False}
    found = await run("get-record-keys", dataStore="e2e-a", query="v2")
    assert found["keys"] == ["k2"] and found["hasRegisteredKeys"] is True, found
    keys = await run("list-keys", dataStore="e2e-a")
    assert sorted(keys) == ["had", "k1", "k2", "k3", "list", "made"], keys
    listed = await run("list-records", dataStore="e2e-a", keys=["k1"], returnType="object")
    assert listed == {"k1": {"n": 1}}
    every = await run("get-all-records", dataStore="e2e-a")
    assert every == {
        "k1": {"n": 1},
        "k2": "v2",
        "k3": 3,
        "list": ["x", {"y": 2}],
        "made": "fresh",
        "had": 7,
    }, every
    difference = await run(
        "get-difference", dataStoreA="e2e-b", dataStoreB="e2e-a", returnType="object"
    )
    assert difference == {"only-b": 1}, difference
    ttl = await run("update-ttl", dataStore="e2e-a", key="k1", ttlOption="3600")
    assert ttl["success"] is True and ttl["ttl"] == 3600, ttl
    await run("delete-single-record", dataStore="e2e-a", key="k1")
    assert await record("k1") is None
    await run("delete-all-records", dataStore="e2e-a")
    assert await run("list-keys", dataStore="e2e-a") == []


async def test_slack_verify_signature_action(
    client: httpx.AsyncClient, packages: dict[str, Path]
) -> None:
    root = packages["slack"]
    props = {
        "slack": await connect(client, "slack", bot_token="xoxb-not-used"),
        "slackSigningSecret": "8f742231b10e8888abcd99yyyzzz85a5",
        "slackSignature": "v0=a45771c0f181b7fb1752e9a26cc1ffb2c428f52ac8ab774ffa4adf8cf2874576",
        "slackRequestTimestamp": "1531420618",
        "requestBody": "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&command=%2Fweather"
        "&text=94070",
    }
    ok = await run_action(client, root, action("verify-slack-signature"), props)
    assert ok["ret"] == {"success": True}, ok
    wrong = await run_action(
        client, root, action("verify-slack-signature"), {**props, "slackSigningSecret": "nope"}
    )
    assert wrong["ret"] == {"success": False}
    short = await run_action(
        client, root, action("verify-slack-signature"), {**props, "slackSignature": "v0=abc"}
    )
    assert not short["ok"] and short["error"]["name"] == "RangeError"
    assert short["error"]["code"] == "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH"


@pytest.mark.parametrize(
    ("slug", "props", "event", "summary"),
    [
        (
            "new-channel-created",
            {},
            {
                "type": "channel_created",
                "event_ts": "1360782804.083113",
                "channel": {"id": "C024BE91L", "name": "fun"},
            },
            "New channel created - fun",
        ),
        (
            "new-user-added",
            {},
            {
                "type": "team_join",
                "user": {"id": "U123", "name": "ada"},
                "event_ts": "1700000000.000100",
            },
            "New User: ada",
        ),
        (
            "new-interaction-event-received",
            {"action_ids": ["approve", "deny"]},
            {
                "type": "block_actions",
                "channel": {"id": "C123"},
                "actions": [{"action_id": "approve"}, {"action_id": "deny"}],
            },
            "New interaction event in channel C123 from action_ids approve, deny",
        ),
    ],
)
async def test_slack_sources(
    client: httpx.AsyncClient,
    packages: dict[str, Path],
    slug: str,
    props: dict[str, Any],
    event: dict[str, Any],
    summary: str,
) -> None:
    root = packages["slack"]
    body = component_files(root, f"sources/{slug}/{slug}.mjs")
    slack = await connect(client, "slack", bot_token="xoxb-not-used")
    deployed = await client.post(
        "/v1/sources", json={**body, "configured_props": {"slack": slack, **props}}
    )
    assert deployed.status_code == 200, deployed.text
    source_id = deployed.json()["data"]["id"]
    run = (await client.post(f"/v1/sources/{source_id}/run", json={"event": event})).json()
    assert run["data"]["ok"], run
    page = (
        await client.get(f"/v1/sources/{source_id}/event_summaries", params={"expand": "event"})
    ).json()
    assert page["page_info"]["count"] == 1
    assert page["data"][0]["metadata"]["summary"] == summary


async def test_commonjs_legacy_source_with_pinned_require(client: httpx.AsyncClient) -> None:
    root = FIXTURES / "http-legacy"
    body = component_files(root, "sources/new-requests/new-requests.js")
    saved = await client.post("/v1/components", json=body)
    assert saved.status_code == 200, saved.text
    data = saved.json()["data"]
    assert data["dependencies"] == {"is-odd": "3.0.1"}
    assert [p["name"] for p in data["configurable_props"]] == ["http", "app", "status"]
    app = await connect(client, "http")
    deployed = await client.post(
        "/v1/sources",
        json={"component_id": data["id"], "configured_props": {"app": app, "status": "202"}},
    )
    assert deployed.status_code == 200, deployed.text
    source_id = deployed.json()["data"]["id"]
    run = (
        await client.post(
            f"/v1/sources/{source_id}/run",
            json={"event": {"method": "POST", "path": "/hook", "id": "e1", "n": 3}},
        )
    ).json()["data"]
    assert run["ok"] and run["value"] == {"odd": True}, run
    page = (await client.get(f"/v1/sources/{source_id}/event_summaries")).json()
    assert page["data"][0]["metadata"]["summary"] == "POST /hook"
