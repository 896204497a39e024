"""``sluice`` with passwords hashed by argon2id at its lowest cost, for the servers the UI tests
start: the same command (``sluice.cli.main.app``) with the cost ``tests/conftest.py`` gives the
suite's own processes, as Django's test settings do. At the production cost each owner created
and each login checked cost a UI server ~0.35 s of CPU. ``tests/e2e`` runs the real ``sluice``
command; ``tests/unit/test_passwords.py`` checks the production cost.

    python tests/sluice_cheap_hashes.py serve --host 127.0.0.1
"""

from __future__ import annotations

from argon2 import PasswordHasher

#: argon2id at its lowest cost (one pass over 1 MiB, one lane): the suite's hasher.
CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)

if __name__ == "__main__":
    from sluice import passwords
    from sluice.cli.main import app

    passwords._hasher = CHEAP
    app(prog_name="sluice")
