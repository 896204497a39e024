"""The egress policy, table-driven: no sockets, no resolver (addresses are passed in)."""

from __future__ import annotations

import doctest
import ipaddress

import pytest

from sluice import errors
from sluice.domain import egress

DEFAULT = egress.EgressPolicy()
PUBLIC = "93.184.215.14"


def test_doctests() -> None:
    assert doctest.testmod(egress).failed == 0


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("0.0.0.0", "0.0.0.0"),
        ("169.254.169.254.", "169.254.169.254"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("[::ffff:7f00:1]", "127.0.0.1"),
        ("[fe80::1%eth0]", "fe80::1"),
        ("Example.COM.", "example.com"),
        ("localhost.", "localhost"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("under_score.example", "under_score.example"),
    ],
)
def test_parse_host(host: str, expected: str) -> None:
    parsed = egress.parse_host(host)
    assert str(parsed) == expected


@pytest.mark.parametrize(
    "host",
    ["", ".", "a..b", "256.1.1.1", "1.2.3.4.5", "0x100.1.1.1", "08.1.1.1", "4294967296",
     "1.2.3.999", "example.com..", "-bad.example", "a b.example", "[::1", "[nonsense]",
     "x.123", "host:80"],
)  # fmt: skip
def test_parse_host_rejects(host: str) -> None:
    with pytest.raises(ValueError):
        egress.parse_host(host)


# Every spelling of a forbidden place, as a literal host: refused with no allow-list.
@pytest.mark.parametrize(
    ("host", "what"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("2130706433", "loopback"),
        ("0x7f.1", "loopback"),
        ("0177.0.0.01", "loopback"),
        ("localhost.", "has no address"),  # a name: with no addresses passed in it is refused
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::127.0.0.1]", "embedding 127.0.0.1, a loopback"),
        ("[::ffff:169.254.169.254]", "link-local"),
        ("[64:ff9b::7f00:1]", "embedding 127.0.0.1"),
        ("[2002:7f00:1::]", "embedding 127.0.0.1"),
        ("[2002:a00:1::1]", "embedding 10.0.0.1, a private"),
        ("0.0.0.0", "unspecified"),
        ("0", "unspecified"),
        ("[::]", "unspecified"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        ("[fd00:ec2::254]", "unique local"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.255", "CGNAT"),
        ("[fc00::1]", "unique local"),
        ("[fe80::1]", "link-local"),
        ("[fec0::1]", "site-local"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("[ff02::1]", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("[2001:db8::1]", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("192.0.0.8", "IETF"),
        ("[2001::1]", "IETF"),  # Teredo
        ("[100::1]", "discard"),
        ("[::2.3.4.5]", "IPv4-compatible"),
        ("[4000::1]", "reserved"),
    ],
)
def test_refused_by_default(host: str, what: str) -> None:
    verdict = DEFAULT.check(host, 80, [])
    assert not verdict.allowed
    assert what in verdict.reason


@pytest.mark.parametrize(
    "host",
    ["8.8.8.8", "1.1.1.1", "[2606:4700:4700::1111]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]",
     "172.32.0.1", "100.128.0.1", "134744072"],
)  # fmt: skip
def test_public_literals_are_allowed(host: str) -> None:
    verdict = DEFAULT.check(host, 443, [])
    assert verdict.allowed, verdict.reason
    assert len(verdict.addresses) == 1


@pytest.mark.parametrize(
    ("resolved", "allowed", "reason"),
    [
        ([PUBLIC], True, ""),
        ([PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], True, ""),
        ([PUBLIC, "127.0.0.1"], False, "evil.test resolves to 127.0.0.1, a loopback address"),
        (["127.0.0.1", PUBLIC], False, "evil.test resolves to 127.0.0.1, a loopback address"),
        (["::ffff:169.254.169.254"], False, "169.254.169.254, a link-local"),
        (["fe80::1%2"], False, "fe80::1, a link-local"),
        (["0.0.0.0"], False, "unspecified"),
        ([], False, "evil.test has no address"),
    ],
)
def test_every_resolved_address_must_pass(resolved: list[str], allowed: bool, reason: str) -> None:
    verdict = DEFAULT.check("evil.test", 443, resolved)
    assert verdict.allowed is allowed
    assert reason in verdict.reason
    if allowed:
        assert verdict.addresses == tuple(ipaddress.ip_address(a) for a in resolved)


def test_literal_hosts_ignore_the_resolver() -> None:
    # An IP literal is its own address: a resolver's answer cannot launder it.
    assert not DEFAULT.check("0x7f.1", 80, [PUBLIC]).allowed
    verdict = DEFAULT.check("8.8.8.8", 80, ["127.0.0.1"])
    assert verdict.allowed and verdict.addresses == (ipaddress.ip_address("8.8.8.8"),)


@pytest.mark.parametrize(
    ("spec", "host", "port", "resolved", "allowed"),
    [
        ("127.0.0.1:8080", "127.0.0.1", 8080, [], True),
        ("127.0.0.1:8080", "127.0.0.1", 8081, [], False),
        ("127.0.0.1:8080", "2130706433", 8080, [], True),  # the same address
        ("127.0.0.1:8080", "[::ffff:127.0.0.1]", 8080, [], True),
        ("127.0.0.1:*", "127.0.0.1", 1, [], True),
        ("127.0.0.0/8:*", "127.9.9.9", 22, [], True),
        ("127.0.0.1:8080", "evil.test", 8080, ["127.0.0.1"], True),  # the address is listed
        ("127.0.0.1:8080", "evil.test", 8080, ["127.0.0.1", "127.0.0.2"], False),
        ("db.internal:5432", "db.internal", 5432, ["10.1.2.3"], True),
        ("db.internal:5432", "DB.Internal.", 5432, ["10.1.2.3", "10.1.2.4"], True),
        ("db.internal:5432", "db.internal", 5433, ["10.1.2.3"], False),
        ("db.internal:5432", "other.internal", 5432, ["10.1.2.3"], False),
        ("*.corp.example:443", "api.corp.example", 443, ["10.0.0.5"], True),
        ("*.corp.example:443", "corp.example", 443, ["10.0.0.5"], False),
        ("*.corp.example:443", "evilcorp.example", 443, ["10.0.0.5"], False),
        ("[fd00::/8]:*", "[fd00:ec2::254]", 80, [], True),
        ("[::1]:80", "[::1]", 80, [], True),
        ("10.0.0.0/8:80, 192.168.0.0/16:80", "192.168.7.7", 80, [], True),
        # Never: unspecified, multicast, broadcast, whatever the list says.
        ("0.0.0.0/0:*", "0.0.0.0", 80, [], False),
        ("0.0.0.0/0:*", "224.0.0.1", 80, [], False),
        ("anything.example:*", "anything.example", 80, ["0.0.0.0"], False),
        ("[::/0]:*", "[::]", 80, [], False),
    ],
)
def test_allow_list(spec: str, host: str, port: int, resolved: list[str], allowed: bool) -> None:
    verdict = egress.EgressPolicy.parse(spec).check(host, port, resolved)
    assert verdict.allowed is allowed, verdict.reason


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("localhost", "has no port"),
        (":80", "has no port"),
        ("localhost:http", "invalid port"),
        ("localhost:0", "invalid port"),
        ("localhost:65536", "invalid port"),
        ("::1:80", "IPv6 address out of brackets"),
        ("[::1:80", "unclosed ["),
        ("[10.0.0.1]:80", "not IPv6"),
        ("10.0.0.1/8:80", "not a valid network"),
        ("10.0.0.0/33:80", "not a valid network"),
        ("*.10.0.0.1:80", "wildcard"),
        ("bad host:80", "not a valid host"),
        ("ok.example:80,, x y:1", "not a valid host"),
    ],
)
def test_bad_entries_are_clear_errors(spec: str, why: str) -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        egress.EgressPolicy.parse(spec)
    assert why in caught.value.message
    assert caught.value.message.startswith("SLUICE_EGRESS_ALLOW: ")
    assert caught.value.field == "egress_allow"


def test_empty_spec_is_the_default() -> None:
    assert egress.EgressPolicy.parse(" , ,") == DEFAULT


def test_bad_ports_are_refused() -> None:
    assert "port" in DEFAULT.check("8.8.8.8", 0, []).reason
    assert "port" in DEFAULT.check("8.8.8.8", 70000, []).reason
