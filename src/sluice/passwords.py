"""Browser passwords: argon2id through argon2-cffi (its default parameters, RFC 9106's second
recommended set). Beside the layers, as ``crypto.py``: the engine and the CLI both use it.

>>> h = hash_password("correct horse")
>>> verify(h, "correct horse"), verify(h, "wrong")
(True, False)
"""

from __future__ import annotations

import functools

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

#: What every password is hashed with: argon2-cffi's defaults, RFC 9106's second recommended
#: set (argon2id, 3 passes over 64 MiB, 4 lanes): ~0.27 s of CPU for a hash and a check. The
#: test suite swaps in argon2id at its lowest cost (``tests/conftest.py``), as Django's test
#: settings do, and ``tests/unit/test_passwords.py`` checks this one in a process of its own.
_hasher = PasswordHasher()

#: Shorter passwords are refused (NIST SP 800-63B's minimum for chosen passwords).
MIN_LENGTH = 8
#: Longer ones too: hashing megabytes is a denial of service, not a better password.
MAX_LENGTH = 1024


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def problem(password: str) -> str | None:
    """Why ``password`` cannot be used, or None."""
    if len(password) < MIN_LENGTH:
        return f"the password needs at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"the password may have at most {MAX_LENGTH} characters"
    return None


@functools.cache
def dummy_hash() -> str:
    """Checked against when no account matches, so a login takes as long either way. Made at
    the first login (known account or not; a hash costs ~0.35 s of CPU), not when the module
    is imported, as it was: every process importing the platform paid it (a CLI command, each
    test process, a server's start)."""
    return hash_password("not a password of anyone")
