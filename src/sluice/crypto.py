"""Secrets at rest: AES-256-GCM with a versioned master key and row-bound associated data.

A token looks like ``v1.<key_version>.<base64url(nonce ‖ ciphertext ‖ tag)>``. The associated
data names the row and field (``deployed_components:dc_x:props.token``), so a ciphertext copied
into another row or field does not decrypt. The master key never lives in the database: it
comes from ``SLUICE_SECRET_KEY`` or from ``<data_dir>/secret.key`` (created 0600 on first use).
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sluice import errors

_NONCE = 12


class Cipher:
    def __init__(self, keys: dict[int, bytes], current: int) -> None:
        if current not in keys:
            raise ValueError("current key version missing")
        for version, key in keys.items():
            if len(key) != 32:
                raise ValueError(f"key version {version} must be 32 bytes")
        self._keys = {v: AESGCM(k) for v, k in keys.items()}
        self._current = current

    @classmethod
    def load(cls, secret_key: str, data_dir: Path) -> Cipher:
        """The key from the setting when given, else from (or into) ``data_dir/secret.key``."""
        if secret_key:
            return cls({1: _decode_key(secret_key, "SLUICE_SECRET_KEY")}, 1)
        path = data_dir / "secret.key"
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            key = base64.b64encode(secrets.token_bytes(32)).decode()
            # O_EXCL: two processes starting at once must not each write a different key.
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(key + "\n")
        return cls({1: _decode_key(path.read_text().strip(), str(path))}, 1)

    def encrypt(self, plaintext: str, aad: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._keys[self._current].encrypt(nonce, plaintext.encode(), aad.encode())
        body = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"v1.{self._current}.{body}"

    def decrypt(self, token: str, aad: str) -> str:
        try:
            scheme, version, body = token.split(".", 2)
            if scheme != "v1":
                raise ValueError(scheme)
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            key = self._keys[int(version)]
            return key.decrypt(raw[:_NONCE], raw[_NONCE:], aad.encode()).decode()
        except (ValueError, KeyError, InvalidTag) as exc:
            # Never include the token or plaintext in the message.
            raise errors.InternalError(f"a stored secret could not be decrypted ({aad})") from exc


def _decode_key(value: str, origin: str) -> bytes:
    try:
        key = base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise errors.InvalidRequest(f"{origin}: the secret key must be base64") from exc
    if len(key) != 32:
        raise errors.InvalidRequest(f"{origin}: the secret key must be 32 bytes of base64")
    return key
