"""Dedupe strategies against small reference models of the spec's table (Hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sluice.domain import dedupe

NOW = 1_700_000_000_000


def emit(i: Any, ts: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"id": i} if i is not None else {}
    if ts is not None:
        meta["ts"] = ts
    return {"event": {"i": i}, "meta": meta}


def ids_of(decision: dedupe.Decision) -> list[Any]:
    return [e["meta"]["id"] for e in decision.emitted]


batches = st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=8)


@given(batches)
def test_unique_matches_a_fifo_model(runs: list[list[int]]) -> None:
    state: dict[str, Any] | None = None
    cache: list[str] = []
    for run in runs:
        decision = dedupe.apply("unique", state, [emit(str(i)) for i in run], NOW)
        expected = []
        for i in map(str, run):
            if i not in cache:
                expected.append(i)
                cache.append(i)
                cache = cache[-100:]
        assert ids_of(decision) == expected
        state = decision.state


def test_unique_cache_holds_the_last_100_ids() -> None:
    state = dedupe.apply("unique", None, [emit(i) for i in range(101)], NOW).state
    # id 0 was purged (first in, first out); 1..100 are still known.
    again = dedupe.apply("unique", state, [emit(1), emit(100), emit(0)], NOW)
    assert ids_of(again) == [0]
    # Adding 0 evicted 1, the oldest.
    assert ids_of(dedupe.apply("unique", again.state, [emit(1)], NOW)) == [1]


@given(batches)
def test_greatest_matches_a_max_model(runs: list[list[int]]) -> None:
    state: dict[str, Any] | None = None
    best: float | None = None
    for run in runs:
        decision = dedupe.apply("greatest", state, [emit(i) for i in run], NOW)
        expected = []
        for i in run:
            if best is None or i > best:
                expected.append(i)
                best = i
        assert ids_of(decision) == expected
        state = decision.state


def test_greatest_needs_numeric_ids() -> None:
    decision = dedupe.apply("greatest", None, [emit("abc"), emit("12"), emit(5)], NOW)
    assert ids_of(decision) == ["12"]
    assert "numeric" in decision.dropped[0][1]


@given(batches)
def test_last_matches_its_model(runs: list[list[int]]) -> None:
    state: dict[str, Any] | None = None
    cached: str | None = None
    for run in runs:
        decision = dedupe.apply("last", state, [emit(i) for i in run], NOW)
        keys = [str(i) for i in run]
        start = keys.index(cached) + 1 if cached in keys else 0
        assert [str(i) for i in ids_of(decision)] == keys[start:]
        if keys:
            cached = keys[-1]
        state = decision.state


def test_emits_with_ts_are_ordered_oldest_first_and_last_caches_the_newest() -> None:
    batch = [emit("c", ts=300), emit("a", ts=100), emit("b", ts=200)]
    decision = dedupe.apply("last", None, batch, NOW)
    assert ids_of(decision) == ["a", "b", "c"]
    assert decision.state == {"last": "c"}
    assert ids_of(dedupe.apply(None, None, batch, NOW)) == ["a", "b", "c"]


def test_without_id_nothing_is_emitted_under_a_strategy_and_the_reason_is_given() -> None:
    for strategy in ("unique", "greatest", "last"):
        decision = dedupe.apply(strategy, None, [emit(None), emit(1)], NOW)
        assert ids_of(decision) == [1]
        assert "needs an id" in decision.dropped[0][1]
    assert len(dedupe.apply(None, None, [emit(None), emit(None)], NOW).emitted) == 2
