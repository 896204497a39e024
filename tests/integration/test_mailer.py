"""The mailer against a real SMTP server (aiosmtpd, in the test's loop on a free port) and the
outbox folder: plain SMTP, AUTH, STARTTLS, implicit TLS, failures that keep the password out."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email.parser
import email.policy
import ipaddress
import logging
import re
import socket
import ssl
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sluice import errors
from sluice.clock import FakeClock
from sluice.engine.outbound import mailer
from tests.conftest import make_settings

USER = "ada"
PASSWORD = "s3cr:et/p@ss"  # needs percent-encoding in the URL


@dataclass
class Inbox:
    """What the SMTP server received."""

    port: int
    messages: list[email.message.EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    tls: list[bool] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Any, envelope: Any) -> str:
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.tls.append(session.ssl is not None)
        parsed = email.parser.BytesParser(policy=email.policy.default).parsebytes(
            envelope.original_content
        )
        assert isinstance(parsed, email.message.EmailMessage)
        self.messages.append(parsed)
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: SMTP, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        self.logins.append((login, password))
        # handled=False: aiosmtpd answers 535 itself on a failure.
        return AuthResult(success=(login, password) == (USER, PASSWORD), handled=False)


@contextlib.asynccontextmanager
async def smtp_server(
    *, implicit_tls: ssl.SSLContext | None = None, **smtp_kwargs: Any
) -> AsyncIterator[Inbox]:
    inbox = Inbox(port=0)
    if smtp_kwargs.pop("auth", False):
        smtp_kwargs["authenticator"] = inbox.authenticate
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(inbox, hostname="smtp.test", loop=loop, **smtp_kwargs),
        "127.0.0.1",
        0,
        ssl=implicit_tls,
    )
    inbox.port = server.sockets[0].getsockname()[1]
    try:
        yield inbox
    finally:
        server.close()
        await server.wait_closed()


@dataclass(frozen=True)
class Tls:
    server: ssl.SSLContext
    client: ssl.SSLContext


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A self-signed certificate for 127.0.0.1, and a client context that trusts it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert_pem)
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return Tls(server, client)


def free_port() -> int:
    """A port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_mailer(tmp_path: Path, smtp_url: str = "", **kwargs: Any) -> mailer.Mailer:
    settings = make_settings(tmp_path, smtp_url=smtp_url, mail_from="Sluice <sluice@example.org>")
    return mailer.Mailer(settings, timeout=5, **kwargs)


# --- the outbox ----------------------------------------------------------------------------


def read_eml(path: Path) -> email.message.EmailMessage:
    parsed = email.parser.BytesParser(policy=email.policy.default).parsebytes(path.read_bytes())
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


async def test_outbox_writes_one_private_eml_per_message(tmp_path: Path) -> None:
    clock = FakeClock(start_ms=1_763_712_000_123)
    m = make_mailer(tmp_path, clock=clock)
    outcome = await m.send(to="ada@example.com", subject="Héllo", text="Body line\n")
    path = Path(outcome["path"])
    assert outcome == {
        "status": "written",
        "transport": "outbox",
        "path": str(path),
        "message_id": outcome["message_id"],
    }
    assert path.parent == tmp_path / "outbox"
    assert re.fullmatch(r"0001763712000123-[0-9a-f]{8}\.eml", path.name)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    msg = read_eml(path)
    assert msg["From"] == "Sluice <sluice@example.org>"
    assert msg["To"] == "ada@example.com"
    assert msg["Subject"] == "Héllo"
    assert msg["Message-ID"] == outcome["message_id"]
    assert msg["Message-ID"].endswith("@example.org>")
    assert msg["Date"].datetime == datetime.datetime(2025, 11, 21, 8, 0, 0, tzinfo=datetime.UTC)
    assert not msg.is_multipart()
    assert msg.get_content() == "Body line\n"

    # Names sort by time; no temporary file is left behind.
    clock.advance(ms=1)
    second = await m.send(to="ada@example.com", subject="Second", text="2")
    names = sorted(p.name for p in (tmp_path / "outbox").iterdir())
    assert names == [path.name, Path(second["path"]).name]


async def test_outbox_html_is_multipart_alternative(tmp_path: Path) -> None:
    outcome = await make_mailer(tmp_path).send(
        to="ada@example.com", subject="Report", text="plain", html="<p>rich</p>"
    )
    msg = read_eml(Path(outcome["path"]))
    assert msg.get_content_type() == "multipart/alternative"
    plain, html = msg.iter_parts()
    assert (plain.get_content_type(), plain.get_content().strip()) == ("text/plain", "plain")
    assert (html.get_content_type(), html.get_content().strip()) == ("text/html", "<p>rich</p>")


@pytest.mark.parametrize(
    ("to", "subject", "field"),
    [
        ("ada@example.com", "Hi\r\nBcc: eve@example.com", "subject"),
        ("ada@example.com", "Hi\nthere", "subject"),
        ("ada@example.com\r\nBcc: eve@example.com", "Hi", "to"),
        ("not an address", "Hi", "to"),
    ],
)
async def test_header_injection_and_bad_addresses_are_refused(
    tmp_path: Path, to: str, subject: str, field: str
) -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        await make_mailer(tmp_path).send(to=to, subject=subject, text="x")
    assert caught.value.field == field
    assert not (tmp_path / "outbox").exists()


async def test_outbox_that_cannot_be_written_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "outbox").write_text("a file where the folder should be")
    with pytest.raises(errors.DeliveryFailed, match="outbox"):
        await make_mailer(tmp_path).send(to="ada@example.com", subject="x", text="x")


# --- SMTP ----------------------------------------------------------------------------------


async def test_smtp_delivers_text_and_html(tmp_path: Path) -> None:
    async with smtp_server() as inbox:
        m = make_mailer(tmp_path, f"smtp://127.0.0.1:{inbox.port}")
        outcome = await m.send(
            to="Ada <ada@example.com>", subject="Ünïcode subject", text="hi", html="<b>hi</b>"
        )
    assert outcome == {
        "status": "sent",
        "transport": "smtp",
        "message_id": outcome["message_id"],
    }
    assert inbox.envelopes == [("sluice@example.org", ["ada@example.com"])]
    (msg,) = inbox.messages
    assert msg["Subject"] == "Ünïcode subject"
    assert msg["To"] == "Ada <ada@example.com>"
    assert msg["Message-ID"] == outcome["message_id"]
    assert msg.get_content_type() == "multipart/alternative"
    plain, html = msg.iter_parts()
    assert plain.get_content().strip() == "hi"
    assert html.get_content().strip() == "<b>hi</b>"
    assert not (tmp_path / "outbox").exists()


async def test_smtp_auth_with_encoded_credentials(tmp_path: Path) -> None:
    async with smtp_server(auth=True, auth_require_tls=False) as inbox:
        url = f"smtp://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{inbox.port}"
        outcome = await make_mailer(tmp_path, url).send(to="ada@example.com", subject="s", text="t")
    assert outcome["status"] == "sent"
    assert inbox.logins == [(USER, PASSWORD)]
    assert len(inbox.messages) == 1


async def test_wrong_password_fails_without_revealing_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "Wr0ng-Passw0rd!"
    caplog.set_level(logging.DEBUG)
    async with smtp_server(auth=True, auth_require_tls=False) as inbox:
        url = f"smtp://{USER}:{quote(wrong, safe='')}@127.0.0.1:{inbox.port}"
        m = make_mailer(tmp_path, url)
        with pytest.raises(errors.DeliveryFailed) as caught:
            await m.send(to="ada@example.com", subject="s", text="t")
    assert inbox.logins and set(inbox.logins) == {(USER, wrong)}  # smtplib tries PLAIN, LOGIN
    assert inbox.messages == []
    exc = caught.value
    assert f"SMTP delivery to 127.0.0.1:{inbox.port} failed" in str(exc)
    assert "SMTPAuthenticationError" in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__
    records = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    for text in (str(exc), repr(exc), repr(exc.details), records, repr(m), repr(m.target)):
        assert wrong not in text
        assert quote(wrong, safe="") not in text


async def test_starttls_happens_before_auth(tmp_path: Path, tls: Tls) -> None:
    # auth_require_tls (the default) makes the server refuse AUTH on a clear connection.
    async with smtp_server(
        auth=True, auth_required=True, tls_context=tls.server, require_starttls=True
    ) as inbox:
        url = f"smtp://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{inbox.port}?starttls=1"
        m = make_mailer(tmp_path, url, ssl_context=tls.client)
        outcome = await m.send(to="ada@example.com", subject="over tls", text="t")
    assert outcome["status"] == "sent"
    assert inbox.tls == [True]
    assert inbox.messages[0]["Subject"] == "over tls"


async def test_smtps_implicit_tls(tmp_path: Path, tls: Tls) -> None:
    async with smtp_server(implicit_tls=tls.server) as inbox:
        m = make_mailer(tmp_path, f"smtps://127.0.0.1:{inbox.port}", ssl_context=tls.client)
        outcome = await m.send(to="ada@example.com", subject="implicit", text="t")
        assert outcome["status"] == "sent"
        assert inbox.messages[0]["Subject"] == "implicit"

        # The system trust store does not know the self-signed certificate.
        untrusting = make_mailer(tmp_path, f"smtps://127.0.0.1:{inbox.port}")
        with pytest.raises(errors.DeliveryFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.send(to="ada@example.com", subject="x", text="t")
    assert len(inbox.messages) == 1


async def test_unreachable_server_fails_clearly(tmp_path: Path) -> None:
    port = free_port()
    url = f"smtp://{USER}:{quote(PASSWORD, safe='')}@127.0.0.1:{port}"
    with pytest.raises(errors.DeliveryFailed) as caught:
        await make_mailer(tmp_path, url).send(to="ada@example.com", subject="s", text="t")
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert "ConnectionRefusedError" in str(caught.value)
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://mail.test", ("mail.test", 25, "none", "", "")),
        ("smtp://u:p@mail.test?starttls=1", ("mail.test", 587, "starttls", "u", "p")),
        ("smtps://u%40x:p%2Fq@mail.test", ("mail.test", 465, "tls", "u@x", "p/q")),
        ("SMTP://mail.test:2525?starttls=true", ("mail.test", 2525, "starttls", "", "")),
    ],
)
def test_parse_smtp_url(url: str, expected: tuple[Any, ...]) -> None:
    t = mailer.parse_smtp_url(url)
    assert (t.host, t.port, t.security, t.username, t.password) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://u:hunter2@mail.test",
        "smtp://u:hunter2@",
        "smtps://u:hunter2@mail.test?starttls=1",
        "smtp://u:hunter2@mail.test:99999",
    ],
)
def test_bad_smtp_url_is_refused_without_echoing_the_password(url: str) -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        mailer.parse_smtp_url(url)
    assert caught.value.field == "smtp_url"
    assert "hunter2" not in str(caught.value)
