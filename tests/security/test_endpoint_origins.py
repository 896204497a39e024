"""Endpoints and the web UI's origin, in a real browser (issue 25): one account's endpoint must
not reach another's visitors or the UI's session through the cookies of a shared origin, and
on per-endpoint hosts (``SLUICE_ENDPOINT_BASE_URL=http://{id}.hooks.sluice.localhost:<port>/``)
each endpoint's cookies stay its own while the UI and ``/v1`` are not served there at all.

A real ``sluice serve`` and Debian's Chromium. The UI is at ``http://sluice.localhost:<port>``:
Chromium maps ``*.localhost`` to loopback and holds it a secure context, so it obeys
``Clear-Site-Data`` there, and an endpoint on ``<id>.hooks.sluice.localhost`` can try a
``Domain=sluice.localhost`` cookie on the UI's host. Each test makes its own server and
accounts.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.ports import free_port
from tests.ui.conftest import CHROMIUM, Server, create_owner, run_cli, serve

#: An attacker's endpoint: it answers with the cookies it was sent, and tries to set a cookie
#: for every visitor of the origin, a nameless one (``=sluice_session=…``, which some browsers
#: store as ``sluice_session``), one for the parent domain, and to clear the origin's data.
SETTER = """export default {
  name: "Cookie setter",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond({
      status: 200,
      // Apart: a browser drops the cookies of an answer that also clears them.
      headers: "clear" in event.query
        ? { "Clear-Site-Data": '"cookies"' }
        : {
            "Set-Cookie": [
              "app_session=from-attacker; Path=/",
              "=sluice_session=planted; Path=/",
              "wide=from-attacker; Path=/; Domain=sluice.localhost",
            ],
          },
      body: { cookie: event.headers.cookie ?? null },
    });
  },
};
"""

#: Another account's endpoint: it answers with the cookies it was sent.
ECHO = """export default {
  name: "Cookie echo",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    await this.http.respond({ status: 200, body: { cookie: event.headers.cookie ?? null } });
  },
};
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bin/test does it as root)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--host-resolver-rules=MAP *.localhost 127.0.0.1",
            ],
        )
        yield launched
        launched.close()


def _deploy(server: Server, code: str) -> str:
    """A new account's source of ``code``: its endpoint URL."""
    name = f"t{secrets.token_hex(4)}"
    made = run_cli(
        "accounts",
        "create",
        "--name",
        name,
        "--email",
        f"{name}@example.com",
        data_dir=server.data_dir,
    )
    key = json.loads(made.stdout)["api_key"]
    with httpx.Client(base_url=_loopback(server), timeout=120) as client:
        deployed = client.post(
            "/v1/sources",
            json={"component_code": code},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert deployed.status_code == 200, deployed.text
    return str(deployed.json()["data"]["endpoint_url"])


def _loopback(server: Server) -> str:
    """The server's URL for clients outside the browser."""
    return server.url.replace("sluice.localhost", "127.0.0.1")


def _cookie_seen(page: Page, url: str) -> object:
    answered = page.goto(url)
    assert answered is not None and answered.status == 200, url
    return answered.json()["cookie"]


def _signed_in(server: Server, browser: Browser) -> tuple[BrowserContext, Page, str]:
    """A browser signed in as the owner (made on the first-run page), and its session."""
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/")
    create_owner(page)
    [session] = [c["value"] for c in context.cookies() if c["name"] == "sluice_session"]
    return context, page, session


def test_on_the_uis_origin_no_cookie_reaches_or_leaves_an_endpoint(
    browser: Browser, tmp_path: Path
) -> None:
    """The default: endpoints at ``<public url>/e/<id>``, the UI's origin. Before issue 25 the
    attacker's ``app_session`` was stored and sent to the other account's endpoint, and its
    ``Clear-Site-Data`` signed the visitor out of the UI."""
    with serve(tmp_path, {"SLUICE_PUBLIC_URL": "http://sluice.localhost:{port}"}) as server:
        context, page, session = _signed_in(server, browser)
        attacker = _deploy(server, SETTER)
        other = _deploy(server, ECHO)
        assert attacker.startswith(f"{server.url}/e/")

        assert _cookie_seen(page, attacker + "?clear=1") is None  # not the session
        page.goto("/sources")  # still signed in
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()
        assert _cookie_seen(page, attacker) is None
        jar = {c["name"]: c["value"] for c in context.cookies()}
        assert jar == {"sluice_session": session}, jar  # nothing set, nothing cleared
        assert _cookie_seen(page, other) is None
        context.close()


def test_on_their_own_hosts_endpoints_keep_their_cookies_apart_from_each_other_and_the_ui(
    browser: Browser, tmp_path: Path
) -> None:
    """``SLUICE_ENDPOINT_BASE_URL`` with ``{id}`` in the host: each endpoint is an origin of
    its own, as Pipedream's ``<id>.m.pipedream.net``. Its cookies come back to it, never to
    another endpoint or to the UI; the UI and ``/v1`` refuse to serve on an endpoint host."""
    env = {
        "SLUICE_PUBLIC_URL": "http://sluice.localhost:{port}",
        "SLUICE_ENDPOINT_BASE_URL": "http://{id}.hooks.sluice.localhost:{port}/",
    }
    with serve(tmp_path, env) as server:
        context, page, session = _signed_in(server, browser)
        attacker = _deploy(server, SETTER)
        other = _deploy(server, ECHO)
        port = server.url.rsplit(":", 1)[1]
        assert attacker.endswith(f".hooks.sluice.localhost:{port}"), attacker
        assert attacker.startswith("http://") and "/e/" not in attacker

        assert _cookie_seen(page, attacker) is None
        # Its own host-only cookie comes back to it (its origin's to keep), and only that.
        assert _cookie_seen(page, attacker + "/?clear=1") == "app_session=from-attacker"
        assert _cookie_seen(page, attacker + "/again") == "app_session=from-attacker"
        assert _cookie_seen(page, other) is None
        ui = {c["name"]: c["value"] for c in context.cookies(server.url)}
        assert ui == {"sluice_session": session}, ui
        page.goto(f"{server.url}/sources")
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()

        # On an endpoint host, every path is the endpoint's: no page, no API, no session.
        for path in ("/v1/users/me", "/login", "/sources", "/static/app.css"):
            assert _cookie_seen(page, attacker + path) == "app_session=from-attacker", path
        with httpx.Client(timeout=60) as client:
            host = attacker.removeprefix("http://").split(":")[0]
            unknown = client.get(
                _loopback(server) + "/sources",
                headers={"Host": f"nosuch.hooks.sluice.localhost:{port}"},
            )
            assert unknown.status_code == 404 and "not_found" in unknown.text, unknown.text
            me = client.get(
                _loopback(server) + "/v1/users/me",
                headers={"Host": host, "Cookie": f"sluice_session={session}"},
            )
            assert me.json() == {"cookie": None}  # the endpoint's answer, not the account
        context.close()


# ---- behind a TLS-terminating proxy ---------------------------------------------------------

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

#: The server blocks docs/deploy.md gives ("Behind nginx"), with this test's names, port,
#: certificate and upstream; the http block around them holds only what a test run needs
#: (paths in its own directory, the master's own user).
NGINX_SERVERS = """
    upstream sluice {
        server 127.0.0.1:UPSTREAM;
        keepalive 16;
    }
    map $http_upgrade $connection_upgrade {
        default upgrade;
        ""      "";
    }
    server {
        listen 127.0.0.1:PORT ssl http2;
        server_name sluice.localhost *.hooks.localhost;
        ssl_certificate     CERT;
        ssl_certificate_key KEY;
        client_max_body_size 60m;
        location / {
            proxy_pass http://sluice;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
        }
    }
"""


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``sluice.localhost`` and ``*.hooks.localhost``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sluice.localhost")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("sluice.localhost"), x509.DNSName("*.hooks.localhost")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextlib.contextmanager
def _nginx(directory: Path, port: int, upstream: int) -> Iterator[None]:
    """nginx on ``127.0.0.1:port`` (TLS) in front of ``127.0.0.1:upstream``. It daemonizes once
    its socket listens, so it is up when the command returns; stopped by its pid."""
    if not Path(NGINX).exists():
        pytest.fail("nginx is missing: apt-get install nginx-light (.ci/run does it)")
    directory.mkdir()
    cert, key = _certificate(directory)
    servers = (
        NGINX_SERVERS.replace("UPSTREAM", str(upstream))
        .replace("PORT", str(port))
        .replace("CERT", str(cert))
        .replace("KEY", str(key))
    )
    (directory / "nginx.conf").write_text(
        f"pid {directory}/nginx.pid;\nerror_log {directory}/error.log;\nworker_processes 1;\n"
        + ("user root;\n" if os.geteuid() == 0 else "")
        + "events { worker_connections 64; }\n"
        + f"http {{\n    access_log {directory}/access.log;\n"
        + "".join(
            f"    {kind}_temp_path {directory}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        + servers
        + "}\n"
    )
    subprocess.run(
        [NGINX, "-p", str(directory), "-c", str(directory / "nginx.conf")],
        check=True,
        capture_output=True,
        timeout=30,
    )
    pid = int((directory / "nginx.pid").read_text())
    try:
        yield
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):  # up to 30 s: its workers finish their connections first
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)


#: An endpoint that answers with what it saw: its cookies and the headers the proxy set.
WHERE = """export default {
  name: "Where",
  version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    const h = event.headers;
    await this.http.respond({ status: 200, body: { cookie: h.cookie ?? null,
      host: h.host ?? null, proto: h["x-forwarded-proto"] ?? null, path: event.path } });
  },
};
"""


def test_per_endpoint_hosts_behind_a_tls_terminating_proxy(
    browser: Browser, tmp_path: Path
) -> None:
    """docs/deploy.md's nginx in front (TLS with a wildcard certificate for
    ``*.hooks.localhost``, ``SLUICE_TRUSTED_PROXIES=127.0.0.1``, no ``SLUICE_PUBLIC_URL``):
    the UI works on https (sign-up's same-origin check, a ``Secure`` session cookie), the API
    prints each endpoint's ``https://<id>.hooks.localhost:<port>`` URL, endpoints keep their
    cookies apart from each other and the UI, and the UI and ``/v1`` answer nothing on an
    endpoint host. With the ``proxy_set_header Host $http_host;`` docs/deploy.md gave before, the
    proxy on a port of its own dropped the port from ``Host`` and the UI refused its own
    sign-up form ("cross-origin request refused"): seen on the first run of this test."""
    port = free_port()
    env = {
        "SLUICE_ENDPOINT_BASE_URL": f"https://{{id}}.hooks.localhost:{port}/",
        "SLUICE_TRUSTED_PROXIES": "127.0.0.1",
    }
    with (
        serve(tmp_path / "data", env) as server,
        _nginx(tmp_path / "nginx", port, int(server.url.rsplit(":", 1)[1])),
    ):
        ui = f"https://sluice.localhost:{port}"
        context = browser.new_context(base_url=ui, ignore_https_errors=True)
        page = context.new_page()
        page.goto("/")
        create_owner(page)
        [cookie] = [c for c in context.cookies(ui) if c["name"] == "sluice_session"]
        assert cookie["secure"] is True, cookie  # X-Forwarded-Proto believed

        proxied = httpx.Client(
            base_url=f"https://127.0.0.1:{port}",
            headers={"Host": f"sluice.localhost:{port}"},
            verify=False,  # the test's own self-signed certificate
            timeout=120,
        )
        with proxied:
            attacker = _deploy_through(proxied, server, SETTER)
            other = _deploy_through(proxied, server, WHERE)
        for url in (attacker, other):
            assert re.fullmatch(rf"https://[a-z0-9]{{20}}\.hooks\.localhost:{port}", url), url

        assert _cookie_seen(page, attacker) is None
        assert _cookie_seen(page, attacker + "/?clear=1") == "app_session=from-attacker"
        assert _cookie_seen(page, attacker + "/again") == "app_session=from-attacker"
        seen = page.goto(other + "/path?q=1")
        assert seen is not None and seen.status == 200
        host = other.removeprefix("https://")
        assert seen.json() == {"cookie": None, "host": host, "proto": "https", "path": "/path"}
        jar = {c["name"]: c["value"] for c in context.cookies(ui)}
        assert jar == {"sluice_session": cookie["value"]}, jar
        page.goto(f"{ui}/sources")
        expect(page.get_by_role("heading", name="Sources")).to_be_visible()
        for path in ("/v1/users/me", "/login", "/sources", "/static/app.css"):
            assert _cookie_seen(page, attacker + path) == "app_session=from-attacker", path
        context.close()


def _deploy_through(client: httpx.Client, server: Server, code: str) -> str:
    """A new account's source of ``code``, deployed through the proxy: its endpoint URL."""
    name = f"t{secrets.token_hex(4)}"
    made = run_cli(
        "accounts",
        "create",
        "--name",
        name,
        "--email",
        f"{name}@example.com",
        data_dir=server.data_dir,
    )
    key = json.loads(made.stdout)["api_key"]
    deployed = client.post(
        "/v1/sources",
        json={"component_code": code},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert deployed.status_code == 200, deployed.text
    return str(deployed.json()["data"]["endpoint_url"])
