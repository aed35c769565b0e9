"""Decisions as values: what ``shown`` lists whatever order it is asked in (its cache is an
optimisation only), and what ``without`` keeps of the decisions it shows through."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from amplifier_module_context_simple.views._decisions import (
    CompactionStats,
    Decisions,
    EarlierNotice,
    LeftOutMap,
    NoticeFigures,
)
from amplifier_module_context_simple.views._notice import notice_message

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


@given(st.integers(0, 12), st.frozensets(st.integers(0, 12)), st.frozensets(st.integers(0, 12)))
def test_before_keeps_only_what_was_decided_about_earlier_positions(
    position: int, removed: frozenset[int], shortened: frozenset[int]
) -> None:
    decisions = Decisions(
        removed=removed,
        truncated=MappingProxyType({p: 10 * p for p in shortened}),
        stubbed=MappingProxyType({p: 7 * p for p in shortened - removed}),
        level=3,
        escalations=2,
        relaxed=removed | shortened,
    )
    kept = decisions.before(position)
    assert kept.removed == {p for p in removed if p < position}
    assert dict(kept.truncated) == {p: 10 * p for p in shortened if p < position}
    assert dict(kept.stubbed) == {p: 7 * p for p in shortened - removed if p < position}
    assert kept.relaxed == {p for p in removed | shortened if p < position}
    assert (kept.level, kept.escalations) == (3, 2)


_share = st.floats(0, 1)


@given(st.integers(0, 200_000), st.tuples(_share, _share, _share), st.booleans())
@example(size=123_456, shares=(1.0, 1.0, 1.0), relaxed=True)
def test_the_largest_figures_make_the_longest_notice_a_history_can_get(
    size: int, shares: tuple[float, float, float], relaxed: bool
) -> None:
    removed, truncated, stubbed = (int(size * share) for share in shares)
    figures = NoticeFigures(size, removed, truncated, stubbed, relaxed=relaxed)
    for verbosity in ("minimal", "normal", "verbose"):
        longest = notice_message(NoticeFigures.largest(size), verbosity)["content"]
        assert len(notice_message(figures, verbosity)["content"]) <= len(longest)


def test_a_map_is_read_only_once_made_and_made_only_once() -> None:
    figures = NoticeFigures(10, 3, 0, 0, relaxed=False)
    left_out = LeftOutMap(Decisions(removed=frozenset({1, 2, 3})), figures, (), bound=50, length=10)
    assert not left_out.made
    with pytest.raises(RuntimeError) as before:
        _ = left_out.lines
    assert str(before.value) == "the map of what was left out is read before it was made"
    assert left_out.recipe()[1] is figures
    left_out.keep(("Left out:", "- a.py"))
    assert left_out.made and left_out.lines == ("Left out:", "- a.py")
    with pytest.raises(RuntimeError) as again:
        left_out.recipe()
    assert str(again.value) == "the map of what was left out was made already"


STANDING = EarlierNotice(2, NoticeFigures(8, 3, 0, 0, relaxed=False), None, tokens=40)


def compaction_stats(**placed: Any) -> CompactionStats:
    return CompactionStats(
        before_tokens=900, after_tokens=400, before_messages=12, after_messages=6,
        messages_removed=6, messages_truncated=0, user_messages_stubbed=0,
        system_messages_preserved=0, strategy_level=3, budget=1_000, target_tokens=500,
        protected_recent=0.3, protected_tool_results=5, **placed,
    )  # fmt: skip


@pytest.mark.parametrize(
    "placed",
    [
        {"notice_at": 4},
        {"earlier_notices": (STANDING,)},
        {"notice_at": 4, "earlier_notices": (STANDING,)},
    ],
)
def test_over_a_rewritten_history_no_notice_keeps_the_place_it_was_given(
    placed: dict[str, Any],
) -> None:
    stats = compaction_stats(**placed)
    rewritten = stats.rewritten()
    assert (rewritten.notice_at, rewritten.earlier_notices) == (None, ())
    assert replace(rewritten, **placed) == stats, "only where the notices stand is forgotten"


def test_figures_with_no_notice_placed_are_the_same_over_a_rewritten_history() -> None:
    stats = compaction_stats()
    assert stats.rewritten() is stats
