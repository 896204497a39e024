"""domain/limits.py (TrimSchedule): a list is trimmed once a tenth of its retention was added."""

from sluice.domain.limits import TrimSchedule


def test_a_trim_is_due_after_a_tenth_of_the_retention_per_list() -> None:
    trims = TrimSchedule()
    assert [trims.due("a", added=1, retention=30) for _ in range(6)] == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    assert trims.due("b", added=0, retention=30) is False  # nothing added: never
    assert trims.due("b", added=5, retention=30) is True  # a burst counts whole
    assert trims.due("c", added=1, retention=5) is True  # small retentions: every write
