"""Free TCP ports for the servers the tests start as processes.

A port the kernel hands out (``bind`` to port 0) comes from its ephemeral range, the range every
outbound connection on the machine also takes its local port from: between the probe closing
and the server binding, a connection of a neighbouring test (to PostgreSQL, to a server, npm's)
can take that port, and the server fails with "Address already in use" (seen in a full run:
``tests/ui/test_first_hour.py`` on port 58937). A port below that range is never given to an
outbound connection, so only a listener started in the same instant could take it: ports are
drawn at random from below the range and each is checked free.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: The lowest port drawn: above the well-known and most registered services' ports.
LOWEST = 20000
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.SystemRandom()


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now, outside the ephemeral range if it can."""
    start = _ephemeral_start()
    if start - LOWEST >= 1000:
        for _ in range(200):
            port = _random.randrange(LOWEST, start)
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as probe:  # no room below the range: the kernel's choice
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
