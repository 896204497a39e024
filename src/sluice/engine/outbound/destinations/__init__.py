"""Performers of the ``$.send.*`` destinations: ``http``, ``email`` and ``s3``, one module each.

A workflow queues ``$.send.*`` calls; they are delivered after the run ends, each once, with no
retries (Pipedream's semantics). The convention, for every performer:

* a malformed config RAISES ``errors.InvalidSend`` (a ``ValueError`` and an
  ``InvalidRequest``) whose message names the destination and the field:
  ``$.send.http: url must be an http(s) URL``.
  ``check_http`` / ``check_email`` / ``check_s3`` run the same validation without sending,
  so a caller can refuse a config when the step queues it;
* anything else RETURNS an outcome dict, a delivery failure included::

      {"status": "sent", ...}                      delivered (details per destination)
      {"status": "written", "transport": "outbox", ...}   e-mail kept in the outbox (no SMTP)
      {"status": "failed", "error": "$.send.http: POST http://h/p timed out after 5 s", ...}

Outcomes never hold a password or the request's query string (which often carries a token).

The performers are ``http.py``, ``email.py`` and ``s3.py``; the config readers they share are in
``config.py``. This package's names are the ones callers use (``destinations.send_http``).
"""

from sluice.engine.outbound.destinations.email import EmailSend, check_email, send_email
from sluice.engine.outbound.destinations.http import HTTP_METHODS, HttpSend, check_http, send_http
from sluice.engine.outbound.destinations.s3 import (
    S3_TIMEOUT_SECONDS,
    S3Send,
    check_s3,
    s3_key,
    send_s3,
    sign_v4,
)

__all__ = [
    "HTTP_METHODS",
    "S3_TIMEOUT_SECONDS",
    "EmailSend",
    "HttpSend",
    "S3Send",
    "check_email",
    "check_http",
    "check_s3",
    "s3_key",
    "send_email",
    "send_http",
    "send_s3",
    "sign_v4",
]
