"""Secrets inside a stored ``$.send`` config: a ``$.send.http`` password is stored encrypted,
bound to its run and send (``run_sends:<run>:<idx>:password``), and decrypted only to send."""

from __future__ import annotations

from typing import Any

from sluice.crypto import Cipher

#: Marks an encrypted value in a stored send config.
SEALED = "$sealed"


def _aad(run_id: str, idx: int) -> str:
    return f"run_sends:{run_id}:{idx}:password"


def seal(cipher: Cipher, config: Any, run_id: str, idx: int) -> Any:
    """``config`` with its password encrypted (unchanged when it has none)."""
    auth = config.get("auth") if isinstance(config, dict) else None
    if not isinstance(auth, dict) or not isinstance(auth.get("password"), str):
        return config
    token = cipher.encrypt(auth["password"], _aad(run_id, idx))
    return {**config, "auth": {**auth, "password": {SEALED: token}}}


def unseal(cipher: Cipher, config: Any, run_id: str, idx: int) -> dict[str, Any]:
    """The config as the run gave it (``{}`` when it is not an object)."""
    if not isinstance(config, dict):
        return {}
    auth = config.get("auth")
    if not isinstance(auth, dict):
        return config
    sealed = auth.get("password")
    if isinstance(sealed, dict) and SEALED in sealed:
        return {
            **config,
            "auth": {**auth, "password": cipher.decrypt(sealed[SEALED], _aad(run_id, idx))},
        }
    return config
