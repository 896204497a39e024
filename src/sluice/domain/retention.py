"""When to trim a stored list (events, logs, runs) back to its retention: not on every write
(a DELETE per run costs), but once about a tenth of the retention was added since the last
trim, so a list never holds more than 110% of it.

>>> trims = TrimSchedule()
>>> [trims.due(("events", "dc_1"), added=1, retention=20) for _ in range(3)]
[False, True, False]
"""

from __future__ import annotations

from collections.abc import Hashable


class TrimSchedule:
    """Counts what was added per list since its last trim (per process: a restart only
    delays the next trim)."""

    def __init__(self) -> None:
        self._added: dict[Hashable, int] = {}

    def due(self, key: Hashable, *, added: int, retention: int) -> bool:
        """Whether ``key``'s list, having grown by ``added``, should be trimmed now."""
        if not added:
            return False
        count = self._added.get(key, 0) + added
        if count >= max(1, retention // 10):
            self._added.pop(key, None)
            return True
        self._added[key] = count
        return False
