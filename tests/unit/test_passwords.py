"""Browser passwords' hashes as a server makes them: argon2id at RFC 9106's second recommended
cost. Checked in a process of its own: the suite's own processes hash at the lowest cost
(``tests/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys

from sluice import passwords

_HASH = "from sluice import passwords; print(passwords.hash_password('correct horse'))"


def test_a_server_hashes_with_argon2id_at_the_recommended_cost() -> None:
    made = subprocess.run(
        [sys.executable, "-c", _HASH], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert made.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), made
    assert passwords.verify(made, "correct horse")
    assert not passwords.verify(made, "correct horsE")


def test_the_suites_cheap_hashes_are_argon2id_too() -> None:
    made = passwords.hash_password("correct horse")
    assert made.startswith("$argon2id$v=19$m=1024,t=1,p=1$"), made
    assert passwords.verify(made, "correct horse")
