"""Passwords hashed by argon2id at its lowest cost, for the suite's own processes: the
in-process platforms (``tests/conftest.py``) and the servers the UI tests fork
(``tests/zygote.py``, ``cheap_hashes=True``), as Django's test settings do. At the production
cost each owner created and each login checked cost a UI server ~0.35 s of CPU. ``tests/e2e``
runs the real ``sluice`` command; ``tests/unit/test_passwords.py`` checks the production cost.
"""

from __future__ import annotations

from argon2 import PasswordHasher

#: argon2id at its lowest cost (one pass over 1 MiB, one lane): the suite's hasher.
CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
