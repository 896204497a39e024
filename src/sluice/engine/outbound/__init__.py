"""What Sluice sends out: the egress-vetted ``httpx`` clients (``http_clients``), webhooks and
their delivery worker (``webhooks``, ``deliveries``, over the lean ``posts`` client), the
mailer, the ``$.send.*`` performers (``destinations``) and the secrets a stored ``$.send``
config keeps sealed (``sealed``).

Must not import any other engine package: the writers (``engine/state/commit.py``) and the
``send`` job's handler call into it, never the reverse.
"""
