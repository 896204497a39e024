"""OAuth API clients (``client_credentials``, ``/v1/oauth/token``), as stored in
``storage/oauth_clients.py``. Plain values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OAuthClient:
    id: str
    account_id: str
    name: str
    created_at: int
