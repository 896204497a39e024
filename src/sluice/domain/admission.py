"""Whether an HTTP endpoint takes a request now: load shedding on backlog and the disk's
reserve. Pure: the queue's and the disk's state in, a refusal (with its ``Retry-After``) out.

An account whose oldest due job has waited longer than the bound is shed: its endpoints answer
503 ``overloaded`` until its backlog is back under the bound. Other accounts are not: the job
worker's shares (``domain/shares.py``) keep their jobs moving, so their own backlog stays
young. When every account's backlog is old, every account is shed, each on its own account.

>>> shed({"u_a": 95_000, "u_b": 2_000}, bound_ms=60_000)
{'u_a': 35}
>>> shed({"u_a": 95_000}, bound_ms=0)
{}
>>> disk_low(free_bytes=10 << 20, reserve_bytes=64 << 20)
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: A shed client is told to come back in at least this many seconds, at most that many.
MIN_RETRY_S = 1
MAX_RETRY_S = 60


def shed(ages_ms: Mapping[str, int], *, bound_ms: int) -> dict[str, int]:
    """``{owner: Retry-After seconds}`` for every owner whose oldest due job has waited
    (``ages_ms``) longer than ``bound_ms``; a bound of 0 or less sheds no one. The wait asked
    of the client is the backlog's age over the bound: about how long the worker needs to
    bring it back, at the rate it ran (clamped to 1..60 s)."""
    if bound_ms <= 0:
        return {}
    return {
        owner: min(MAX_RETRY_S, max(MIN_RETRY_S, math.ceil((age - bound_ms) / 1000)))
        for owner, age in ages_ms.items()
        if age > bound_ms
    }


def disk_low(*, free_bytes: int, reserve_bytes: int) -> bool:
    """Whether new requests are refused: the disk is down to its reserve, kept for the work
    already accepted (its runs' results, their done marks, a checkpoint). A reserve of 0
    refuses nothing (the disk then fills, and the store's own error answers 503)."""
    return reserve_bytes > 0 and free_bytes < reserve_bytes
