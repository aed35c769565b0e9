"""Rendering one stretch of history (views/_render.py): where the in-place notice stands, which
call is still open, and how decisions on single messages show."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from amplifier_module_context_simple.views._decisions import CompactionStats, Decisions
from amplifier_module_context_simple.views._render import (
    TRUNCATION_MARKER,
    notice_boundary,
    open_tail_call,
    render_range,
)

from ..history.test_turn_rule import build
from .test_decisions import compaction_stats
from .test_map_making import indexed


def _decided(
    removed: frozenset[int] = frozenset(),
    truncated: frozenset[int] = frozenset(),
    stubbed: frozenset[int] = frozenset(),
) -> Decisions:
    return Decisions(
        removed=frozenset(removed),
        truncated=MappingProxyType(dict.fromkeys(truncated, 10)),
        stubbed=MappingProxyType(dict.fromkeys(stubbed, 10)),
    )


@pytest.mark.parametrize(
    ("decisions", "latest", "boundary"),
    [
        (_decided(), None, 9),  # nothing reduced: the history's end
        (_decided(removed={6}, truncated={4}), None, 4),
        (_decided(removed={6}, stubbed={3}), None, 3),
        # The first position the latest escalation reduced, of any kind...
        (_decided(removed={2}, stubbed={5}), compaction_stats(stubbed_positions=(5,)), 5),
        (_decided(removed={2}, truncated={7}), compaction_stats(truncated_positions=(7,)), 7),
        (_decided(removed={2, 4}), compaction_stats(removed_positions=(4,)), 4),
        # ...when it still stands; otherwise the first reduced one.
        (_decided(removed={2}), compaction_stats(stubbed_positions=(5,)), 2),
    ],
)
def test_where_the_in_place_notice_stands(
    decisions: Decisions, latest: CompactionStats | None, boundary: int
) -> None:
    assert notice_boundary(decisions, latest, 9) == boundary


def test_a_call_at_the_very_start_can_be_the_open_one() -> None:
    assert open_tail_call(indexed(build("A[c0]"))) == 0
    assert open_tail_call(indexed(build("A[c0] T"))) is None
    assert open_tail_call(indexed(build("H A[c0,c1] T"))) == 1


def test_a_long_message_decided_shortened_is_shortened_to_what_it_keeps() -> None:
    history = build("H A")
    history[1]["content"] = [{"type": "text", "text": "w" * 2_000}]
    index = indexed(history)
    view = render_range(
        index, _decided(truncated={1}), 0, 2, open_tail=None, keep_chars=100
    ).messages
    content = view[1]["content"]
    assert content.startswith(TRUNCATION_MARKER.format(tokens=10))
    assert content.count("w") == 100


def test_a_result_left_out_does_not_take_the_call_s_other_results_with_it() -> None:
    index = indexed(build("H A[c1,c2,c3] T T T"))
    view = render_range(index, _decided(removed={2}), 0, 5, open_tail=None, keep_chars=100)
    assert [m.get("tool_call_id") for m in view.messages] == [None, None, "c2", "c3"]
