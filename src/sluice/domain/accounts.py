"""Accounts and their API keys, as the platform hands them out (stored in
``storage/accounts.py``). Plain values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Account:
    id: str
    username: str
    email: str | None
    is_admin: bool
    created_at: int
    #: The address was proven the account's (``engine/auth/email_verification.py``).
    email_verified: bool = False


@dataclass(frozen=True)
class KeyInfo:
    """An API key as the keys page lists it: never its secret."""

    id: str
    name: str | None
    created_at: int
    last_used_at: int | None
    revoked_at: int | None
