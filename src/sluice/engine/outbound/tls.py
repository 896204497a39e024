"""The TLS context of Sluice's own outbound requests: httpx's (certifi's CA bundle, hostnames
checked), built once per process.

Building one loads and parses the CA bundle: ~15 ms of CPU, most of what making an httpx
client costs, and it was paid by every OAuth token exchange and refresh, every
``component_url`` fetch and every lean poster. An ``ssl.SSLContext`` is safe to share between
connections, threads and event loops; nothing here changes it after it is built.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
