"""The egress policy: where user code and Sluice's own outbound requests may connect.

Pure: the caller resolves the host (once) and passes every resolved address in; the verdict
says whether *all* of them may be reached, and the caller then connects to one of
``verdict.addresses`` and never resolves again (a second lookup is how DNS rebinding gets in).

Refused unless allow-listed: loopback, private (RFC 1918, fc00::/7), shared CGNAT
(100.64/10), link-local and cloud metadata (169.254/16, fe80::/10, fd00:ec2::254), documentation,
benchmarking and reserved ranges, and IPv6 forms that embed such an IPv4 address (mapped,
compatible, 6to4, NAT64). Never allowed, even if listed: the unspecified address (``0.0.0.0``
and ``::`` reach this host's own services on Linux), multicast and broadcast.

``SLUICE_EGRESS_ALLOW`` lists exceptions, comma-separated ``host:port`` entries; ``host`` is a
name (``db.internal``), a ``*.`` suffix (``*.corp.example``), an IPv4 address or CIDR, or an
IPv6 one in brackets (``[fd00::/8]``); ``port`` is a number or ``*``:

>>> policy = EgressPolicy.parse("127.0.0.1:8080, *.corp.example:443, [fd00::/8]:*")
>>> policy.check("127.0.0.1", 8080, ["127.0.0.1"]).allowed
True
>>> policy.check("evil.test", 80, ["93.184.215.14", "127.0.0.1"]).reason
'evil.test resolves to 127.0.0.1, a loopback address'
>>> policy.check("0x7f.1", 8080, []).addresses
(IPv4Address('127.0.0.1'),)
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sluice import errors

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_N = ipaddress.ip_network

#: Never reachable, whatever the allow-list says.
_NEVER: tuple[tuple[IPNetwork, str], ...] = (
    (_N("0.0.0.0/8"), "an unspecified ('this network') address"),
    (_N("224.0.0.0/4"), "a multicast address"),
    (_N("255.255.255.255/32"), "the broadcast address"),
    (_N("::/128"), "the unspecified address"),
    (_N("ff00::/8"), "a multicast address"),
)

#: Refused unless allow-listed (IANA's special-purpose registries, RFC 6890 and successors).
_LOCAL: tuple[tuple[IPNetwork, str], ...] = (
    (_N("127.0.0.0/8"), "a loopback address"),
    (_N("10.0.0.0/8"), "a private address"),
    (_N("172.16.0.0/12"), "a private address"),
    (_N("192.168.0.0/16"), "a private address"),
    (_N("100.64.0.0/10"), "a shared (CGNAT) address"),
    (_N("169.254.0.0/16"), "a link-local (cloud metadata) address"),
    (_N("192.0.0.0/24"), "an IETF protocol assignment address"),
    (_N("192.0.2.0/24"), "a documentation address"),
    (_N("198.51.100.0/24"), "a documentation address"),
    (_N("203.0.113.0/24"), "a documentation address"),
    (_N("192.88.99.0/24"), "a 6to4 relay anycast address"),
    (_N("198.18.0.0/15"), "a benchmarking address"),
    (_N("240.0.0.0/4"), "a reserved address"),
    (_N("::1/128"), "a loopback address"),
    (_N("fc00::/7"), "a unique local (private) address"),
    (_N("fe80::/10"), "a link-local address"),
    (_N("fec0::/10"), "a site-local address"),
    (_N("100::/64"), "a discard-only address"),
    (_N("64:ff9b:1::/48"), "a local-use NAT64 address"),
    # Teredo (2001::/32) tunnels to any IPv4 address, ORCHID is not routable: refuse the block.
    (_N("2001::/23"), "an IETF protocol assignment address"),
    (_N("2001:db8::/32"), "a documentation address"),
    (_N("3fff::/20"), "a documentation address"),
    (_N("5f00::/16"), "a segment-routing (SRv6) address"),
)

_COMPAT = _N("::/96")  # IPv4-compatible (deprecated): ::127.0.0.1
_NAT64 = _N("64:ff9b::/96")
_SIX_TO_FOUR = _N("2002::/16")
_GLOBAL_UNICAST = _N("2000::/3")

_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMBER = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


@dataclass(frozen=True)
class Refusal:
    """Why an address is refused; ``final``: the allow-list cannot lift it."""

    what: str
    final: bool = False


@dataclass(frozen=True)
class Verdict:
    """``allowed`` with the vetted ``addresses`` to connect to, or a ``reason`` for refusing
    (one line, fit for a 403 body or a run's error: no secrets, it names only host and port);
    ``final``: no allow-list entry could lift the refusal."""

    allowed: bool
    reason: str = ""
    addresses: tuple[IPAddress, ...] = ()
    final: bool = False


@dataclass(frozen=True)
class AllowRule:
    """One ``SLUICE_EGRESS_ALLOW`` entry: a name, a ``*.`` suffix or a network, and a port
    (``None``: any)."""

    port: int | None
    name: str | None = None
    suffix: str | None = None
    network: IPNetwork | None = None

    def allows_name(self, name: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return self.name == name
        return self.suffix is not None and name.endswith("." + self.suffix)

    def allows_address(self, address: IPAddress, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        return self.network is not None and address in self.network


# --- hosts and addresses -------------------------------------------------------------------


def parse_host(host: str) -> IPAddress | str:
    """The host of a URL or CONNECT line as an IP address, or as a lowercase name without its
    trailing dot. Raises ``ValueError`` for what is neither.

    Numeric spellings are read as the C resolver (``inet_aton``) and browsers (WHATWG URL) read
    them, so they cannot pass for names: ``2130706433``, ``0x7f.1``, ``0177.0.0.1`` and
    ``127.1`` are all 127.0.0.1, ``[::ffff:127.0.0.1]`` is an IPv6 literal.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        return _canonical(ipaddress.IPv6Address(text[1:-1]))
    if ":" in text:
        return _canonical(ipaddress.IPv6Address(text))
    text = text.lower()
    if text.endswith("."):
        text = text[:-1]
    if not text:
        raise ValueError("empty host")
    labels = text.split(".")
    # WHATWG: a host whose last label is a number is an IPv4 address, or invalid.
    if _NUMBER.match(labels[-1]):
        return _inet_aton(labels)
    try:
        ascii_name = text.encode("idna").decode("ascii") if not text.isascii() else text
    except UnicodeError as exc:
        raise ValueError(f"{host!r} is not a valid host name") from exc
    if len(ascii_name) > 253 or not all(_LABEL.match(label) for label in ascii_name.split(".")):
        raise ValueError(f"{host!r} is not a valid host name")
    return ascii_name


def _inet_aton(parts: list[str]) -> ipaddress.IPv4Address:
    if not 1 <= len(parts) <= 4:
        raise ValueError(f"{'.'.join(parts)!r} is not a valid IPv4 address")
    numbers: list[int] = []
    for part in parts:
        try:
            if part.startswith("0x"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part, 10))
        except ValueError as exc:
            raise ValueError(f"{'.'.join(parts)!r} is not a valid IPv4 address") from exc
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        raise ValueError(f"{'.'.join(parts)!r} is not a valid IPv4 address")
    value = last
    for index, n in enumerate(leading):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _canonical(address: IPAddress) -> IPAddress:
    """Without a zone (``%eth0``), and an IPv4-mapped IPv6 address as the IPv4 it maps: the
    kernel connects ``::ffff:127.0.0.1`` to 127.0.0.1."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
    return address


def address_of(value: str | IPAddress) -> IPAddress:
    """An address as a resolver returns it (``'fe80::1%2'``, ``'::ffff:10.0.0.1'``),
    canonical."""
    if isinstance(value, str):
        return _canonical(ipaddress.ip_address(value.split("%", 1)[0]))
    return _canonical(value)


def refusal(address: IPAddress) -> Refusal | None:
    """Why ``address`` may not be reached without an allow-list entry; None: it is public."""
    address = _canonical(address)
    for network, what in _NEVER:
        if address in network:
            return Refusal(what, final=True)
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = refusal(embedded)
            if inner is not None:
                return Refusal(f"an address embedding {embedded}, {inner.what}", inner.final)
            if address in _COMPAT:
                return Refusal("a deprecated IPv4-compatible address")
            return None
    for network, what in _LOCAL:
        if address in network:
            return Refusal(what)
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST:
        return Refusal("a reserved address")
    if not address.is_global:  # a backstop for ranges registered after this table
        return Refusal("a non-global address")
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    value = int(address)
    if address in _COMPAT and value > 1:  # :: and ::1 are themselves, not 0.0.0.0/0.0.0.1
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _NAT64:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    return None


# --- the policy ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EgressPolicy:
    """The refusals above minus the operator's ``rules``. Build it once with ``parse``."""

    rules: tuple[AllowRule, ...] = ()
    #: When not empty, the only ``(name, port)`` destinations allowed at all (an npm install
    #: reaches its registry and nothing else); the refusals above still apply to them.
    only: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, spec: str, *, setting: str = "SLUICE_EGRESS_ALLOW") -> EgressPolicy:
        """Parse ``host:port`` entries; raises ``errors.InvalidRequest`` naming the bad entry."""
        return cls(tuple(parse_rule(e.strip(), setting) for e in spec.split(",") if e.strip()))

    def extended(self, rules: Iterable[AllowRule]) -> EgressPolicy:
        return EgressPolicy((*self.rules, *rules), self.only)

    def only_to(self, destinations: Iterable[tuple[str, int]]) -> EgressPolicy:
        """This policy, reaching nothing but ``destinations`` (names as ``parse_host`` gives
        them, and ports)."""
        return EgressPolicy(self.rules, frozenset(destinations))

    def check(self, host: str, port: int, resolved: Iterable[str | IPAddress]) -> Verdict:
        """May ``host:port`` be reached at every one of the ``resolved`` addresses?

        An IP-literal ``host`` (in any spelling) is its own address and ``resolved`` is ignored;
        for a name, every resolved address must pass, so a name resolving to one public and one
        loopback address is refused (a rebinding resolver could hand out either).
        """
        shown = f"{host}:{port}"
        if not 0 < port < 65536:
            return Verdict(False, f"{shown}: the port is out of range")
        try:
            target = parse_host(host)
        except ValueError:
            return Verdict(False, f"{shown}: not a valid host")
        if self.only and (str(target), port) not in self.only:
            allowed = ", ".join(f"{name}:{p}" for name, p in sorted(self.only))
            return Verdict(False, f"{shown}: only {allowed} may be reached from here")
        if isinstance(target, str):
            addresses = tuple(dict.fromkeys(address_of(a) for a in resolved))
            named = any(rule.allows_name(target, port) for rule in self.rules)
        else:
            addresses, named = (target,), False
        if not addresses:
            return Verdict(False, f"{host} has no address")
        for address in addresses:
            why = refusal(address)
            if why is None:
                continue
            if not why.final and (
                named or any(rule.allows_address(address, port) for rule in self.rules)
            ):
                continue
            if isinstance(target, str):
                return Verdict(
                    False, f"{target} resolves to {address}, {why.what}", final=why.final
                )
            return Verdict(False, f"{address} is {why.what}", final=why.final)
        return Verdict(True, addresses=addresses)


def parse_rule(entry: str, setting: str = "SLUICE_EGRESS_ALLOW") -> AllowRule:
    """One ``host:port`` entry (see the module docstring)."""

    def bad(why: str) -> errors.InvalidRequest:
        return errors.InvalidRequest(
            f"{setting}: {entry!r} {why}; entries are host:port, *.suffix:port, CIDR:port or "
            "[IPv6]:port, with port a number or *",
            field="egress_allow",
        )

    host, sep, port_text = entry.rpartition(":")
    if not sep or not host:
        raise bad("has no port")
    if port_text == "*":
        port = None
    elif port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise bad("has an invalid port")
    if host.startswith("["):
        if not host.endswith("]"):
            raise bad("has an unclosed [")
        host = host[1:-1]
        if ":" not in host:
            raise bad("has brackets around something that is not IPv6")
    elif ":" in host:
        raise bad("has an IPv6 address out of brackets (write [::1]:80)")
    if "/" in host:
        try:
            network = ipaddress.ip_network(host, strict=True)
        except ValueError as exc:
            raise bad(f"is not a valid network ({exc})") from None
        return AllowRule(port, network=network)
    if host.startswith("*."):
        try:
            suffix = parse_host(host[2:])
        except ValueError:
            suffix = None
        if not isinstance(suffix, str):
            raise bad("has a wildcard on something that is not a host name")
        return AllowRule(port, suffix=suffix)
    try:
        parsed = parse_host(host)
    except ValueError:
        raise bad("is not a valid host") from None
    if isinstance(parsed, str):
        return AllowRule(port, name=parsed)
    return AllowRule(port, network=ipaddress.ip_network(parsed))
