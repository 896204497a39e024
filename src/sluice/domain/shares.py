"""Per-account shares of the job worker's slots. Pure: the counts in, the decision out.

One account may run at most ``share`` jobs at once in a worker, so the worker's other slots
stay free for other accounts however many jobs one account queues (or how long they run).
``pick`` goes through the claimed jobs in order: a job starts when a slot is free and its
account is under its share; once an account is at its share, its later jobs go back to the
queue (``release``), so they never wait in a worker's hands with their leases running, and
their order within the account is kept (claims take the oldest first). ``keep``: jobs that
could start but found no free slot; they start next, before anything newer is claimed.

>>> pick(["a", "a", "b", "a", "c"], busy={"a": 1}, free=2, share=2)
Pick(start=[0, 2], keep=[4], release=[1, 3])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pick:
    """Positions in the claimed jobs: started now, kept for the next free slot, queued again."""

    start: list[int]
    keep: list[int]
    release: list[int]


def effective(share: int, concurrency: int) -> int:
    """The share in force: 0 (none) when it would not leave a slot to other accounts."""
    return share if 0 < share < concurrency else 0


def full(busy: Mapping[str, int], share: int) -> set[str]:
    """The accounts at their share: a claim leaves their jobs queued.

    >>> sorted(full({"a": 2, "b": 1}, share=2)), full({"a": 9}, share=0)
    (['a'], set())
    """
    if share <= 0:
        return set()
    return {owner for owner, count in busy.items() if count >= share}


def pick(owners: Sequence[str], busy: Mapping[str, int], free: int, share: int) -> Pick:
    """Which of the claimed jobs (their accounts, in claim order) to start, keep or release;
    ``busy`` counts each account's jobs running (or waiting for a slot) now."""
    counts = dict(busy)
    blocked: set[str] = set()
    start: list[int] = []
    keep: list[int] = []
    release: list[int] = []
    for position, owner in enumerate(owners):
        if owner in blocked or (share > 0 and counts.get(owner, 0) >= share):
            blocked.add(owner)  # its later jobs too: the account's order is kept
            release.append(position)
        elif len(start) < free:
            start.append(position)
            counts[owner] = counts.get(owner, 0) + 1
        else:
            keep.append(position)
    return Pick(start, keep, release)
