"""What a stored value counts for against the storage quota (``engine/state/quotas.size_of``):
the characters of the compact JSON a JSON column stores, the same whichever dump made it."""

from __future__ import annotations

import datetime
import doctest

from hypothesis import given
from hypothesis import strategies as st

from sluice.domain.text import MARKER, stored_json
from sluice.engine.state import quotas

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def test_doctests() -> None:
    assert doctest.testmod(quotas).failed == 0


@given(JSON)
def test_a_value_counts_the_characters_a_json_column_stores(value: object) -> None:
    # stored_json: what an event's payload or a run's steps are stored as.
    if value is None:
        assert quotas.size_of(value) == 0  # a NULL column: nothing stored
        return
    stored = stored_json(value)
    if MARKER in stored:
        return  # stored wrapped (domain/text.to_stored): a few characters more, not counted
    assert quotas.size_of(value) == (len(value) if isinstance(value, str) else len(stored))


def test_what_orjson_refuses_is_counted_by_json() -> None:
    assert quotas.size_of({1: "a"}) == len('{"1":"a"}')
    assert quotas.size_of(["\ud800"]) == len('["\\ud800"]')
    # Not JSON at all: its str(), as the stored text would hold it.
    when = datetime.datetime(2026, 11, 29, 10, 0, tzinfo=datetime.UTC)
    assert quotas.size_of({"at": when}) == len('{"at":""}') + len(when.isoformat())
