"""Decisions as values: what ``shown`` lists whatever order it is asked in (its cache is an
optimisation only), and what ``without`` keeps of the decisions it shows through."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple.views._decisions import Decisions

_removed = st.frozensets(st.integers(0, 60), max_size=40)
_windows = st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), min_size=1, max_size=8)


@given(_removed, _windows)
def test_shown_lists_what_is_not_left_out_whatever_was_asked_before(
    removed: frozenset[int], windows: list[tuple[int, int]]
) -> None:
    decisions = Decisions(removed=removed)
    for start, stop in windows:
        expected = [p for p in range(start, stop) if p not in removed]
        assert list(decisions.shown(start, stop)) == expected


def test_without_shows_the_positions_whole_and_keeps_the_rest() -> None:
    decisions = Decisions(
        removed=frozenset({1, 2}),
        truncated=MappingProxyType({3: 400, 5: 90}),
        stubbed=MappingProxyType({4: 1200}),
        level=4,
        escalations=3,
        relaxed=frozenset({2, 5}),
    )
    shown = decisions.without(frozenset({2, 4, 5}))
    assert shown == Decisions(
        removed=frozenset({1}),
        truncated=MappingProxyType({3: 400}),
        stubbed=MappingProxyType({}),
        level=4,
        escalations=3,
        relaxed=frozenset(),
    )
