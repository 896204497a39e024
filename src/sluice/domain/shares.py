"""Per-account shares of the job worker's slots. Pure: the counts in, the decision out.

One account may run at most ``share`` jobs at once in a worker, so the worker's other slots
stay free for other accounts however many jobs one account queues (or how long they run).
``pick`` goes through the claimed jobs in order: a job starts when a slot is free and its
account is under its share; once an account is at its share, a few of its later jobs are
kept (``hold``) and the rest go back to the queue (``release``), so no more than those wait
in a worker's hands with their leases running, and their order within the account is kept
(claims take the oldest first). ``keep``: jobs that could start but found no free slot, and
the held ones; they start next, before anything newer is claimed.

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


def pick(
    owners: Sequence[str], busy: Mapping[str, int], free: int, share: int, hold: int = 0
) -> Pick:
    """Which of the claimed jobs (their accounts, in claim order) to start, keep or release;
    ``busy`` counts each account's jobs running (or waiting for a slot) now. Up to ``hold``
    jobs of an account at its share are kept (they start as its jobs end, with no claim in
    between: under one account's burst, one claim would otherwise be needed per finished
    job, and a release of what it took beyond the share); its jobs past those go back.

    >>> pick(["a", "a", "a", "b"], busy={"a": 2}, free=2, share=2, hold=1)
    Pick(start=[3], keep=[0], release=[1, 2])
    """
    counts = dict(busy)
    held: dict[str, int] = {}
    blocked: set[str] = set()
    start: list[int] = []
    keep: list[int] = []
    release: list[int] = []
    for position, owner in enumerate(owners):
        if owner in blocked:
            release.append(position)  # its later jobs too: the account's order is kept
        elif share > 0 and counts.get(owner, 0) >= share:
            if held.get(owner, 0) < hold:
                held[owner] = held.get(owner, 0) + 1
                keep.append(position)
            else:
                blocked.add(owner)
                release.append(position)
        elif len(start) < free:
            start.append(position)
            counts[owner] = counts.get(owner, 0) + 1
        else:
            keep.append(position)
    return Pick(start, keep, release)
