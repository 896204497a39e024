"""A test host on a private address: a network namespace joined to this one by a veth pair.

Made once for the whole run, before any test starts (``tests/conftest.py``'s
``pytest_configure``, in the one process that starts pytest-xdist's workers), and removed after
the last has ended. Adding a link and an address to the host's namespace is a network change
every Chromium on the machine sees: it fails the requests it has in flight with
``net::ERR_NETWORK_CHANGED`` (seen: a browser test of another worker failed while
``tests/security/test_egress.py`` made its namespace). Made before the first browser starts, the
change meets no request. The workers find it in ``SLUICE_TEST_NETNS`` (they inherit the
environment).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass

#: Where the namespace is described for the workers: ``name host_if ns_ip``, or
#: ``!<reason>`` when it could not be made.
ENV = "SLUICE_TEST_NETNS"


@dataclass(frozen=True)
class Netns:
    name: str
    host_if: str
    address: str  # the namespace's end of the veth pair, reachable from here

    def encode(self) -> str:
        return f"{self.name} {self.host_if} {self.address}"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def create() -> Netns | str:
    """The namespace with its veth pair up (10.250.x.1 here, 10.250.x.2 there), or why not."""
    tag = secrets.token_hex(3)
    name, host_if, ns_if = f"sluice-eg-{tag}", f"veg{tag}a", f"veg{tag}b"
    subnet = secrets.randbelow(256)
    host_ip, ns_ip = f"10.250.{subnet}.1", f"10.250.{subnet}.2"
    try:
        _ip("netns", "add", name)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot create a network namespace (needs root and iproute2): {exc}"
    made = Netns(name, host_if, ns_ip)
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", name)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", f"{ns_ip}/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
    except (OSError, subprocess.SubprocessError) as exc:
        delete(made)
        return f"cannot join a network namespace to this one: {exc}"
    return made


def delete(made: Netns) -> None:
    subprocess.run(["ip", "netns", "del", made.name], check=False, timeout=10)
    subprocess.run(
        ["ip", "link", "del", made.host_if], check=False, capture_output=True, timeout=10
    )


def shared() -> Netns | str:
    """The run's namespace (``ENV``), or why there is none."""
    described = os.environ.get(ENV, "")
    if not described:
        return "no network namespace was made for this run (tests/conftest.py makes it)"
    if described.startswith("!"):
        return described[1:]
    name, host_if, address = described.split()
    return Netns(name, host_if, address)
