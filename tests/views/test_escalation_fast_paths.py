"""The shortcuts an escalation takes, held to the general computation they stand in for.

An escalation over a compacted history walks only the positions it shows, reads what changed
from the positions it touched, builds a step's decisions only when they are read and weighs a
shortened form once: each is compared here with the plain computation (every position of the
history, a fresh estimate) on generated sessions, so a shortcut that drifts shows as a
difference.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.planning._planner import Planner
from amplifier_module_context_simple.readings._meter import TokenMeter
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._decisions import (
    NO_DECISIONS,
    CompactionStats,
    Decisions,
)
from amplifier_module_context_simple.views._forms import (
    ShortForms,
    can_truncate,
    stubbed,
    truncated,
)
from amplifier_module_context_simple.views._ladder import (  # pyright: ignore[reportPrivateUsage]
    _recent_floor,  # pyright: ignore[reportPrivateUsage]
    _relax,  # pyright: ignore[reportPrivateUsage]
    _remove,  # pyright: ignore[reportPrivateUsage]
    _truncate,  # pyright: ignore[reportPrivateUsage]
)
from amplifier_module_context_simple.views._render import render_range
from amplifier_module_context_simple.views._working import LeftOut, WorkingPlan

from .test_compaction import sessions

Msg = dict[str, Any]


def _reference_shown(decisions: Decisions, start: int, stop: int) -> list[int]:
    return [p for p in range(start, stop) if p not in decisions.removed]


async def _running_session(
    messages: list[Msg], budget: int, protected: float
) -> list[tuple[Planner, Any, Decisions, CompactionStats | None]]:
    """Plan every request point of ``messages`` as a running session does; returns, per
    escalation, the planner, the plan and the decisions it started from."""
    planner = Planner(
        ContextConfig.from_mapping({"protected_recent": protected}),
        HistoryIndex(estimate_message_tokens),
    )
    meter = TokenMeter()
    decisions, stats = NO_DECISIONS, None
    escalations: list[tuple[Planner, Any, Decisions, CompactionStats | None]] = []
    for point in range(1, len(messages) + 1):
        if point < len(messages) and messages[point]["role"] == "tool":
            continue
        history = messages[:point]
        inputs = await planner.inputs(budget, None)
        scope = planner.scope(history, *inputs)
        plan = planner.plan(scope, decisions=decisions, stats=stats, meter=meter)
        if plan.escalated is not None:
            escalations.append((planner, plan, decisions, stats))
            decisions, stats = plan.decisions, plan.stats
    return escalations


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(1_500, 30_000), st.sampled_from([0.0, 0.3, 0.8]))
async def test_every_escalation_matches_the_general_computation(
    messages: list[Msg], budget: int, protected: float
) -> None:
    for planner, plan, entry, _ in await _running_session(messages, budget, protected):
        step, decisions, index = plan.escalated, plan.decisions, planner.index
        size = len(index.facts)
        # The shown positions the escalation handed on are exactly those not left out.
        assert list(decisions.shown(0, size)) == _reference_shown(decisions, 0, size)
        for start, stop in ((0, size // 2), (size // 3, size), (1, size + 3)):
            assert list(decisions.shown(start, stop)) == _reference_shown(decisions, start, stop)
        # The statistics compared only the touched positions: the full comparison agrees.
        assert step.base is not None
        assert decisions.added(step.base, step.touched) == decisions.added(step.base)
        if step.base is entry:
            removed, truncated_, stubbed = decisions.added(entry)
            assert plan.stats.removed_positions == removed
            assert plan.stats.truncated_positions == truncated_
            assert plan.stats.stubbed_positions == stubbed
        # The body rendered with the planner's remembered estimates is the one a fresh render
        # (every shortened form estimated again) gives.
        keep = planner.config.truncate_chars
        fresh = render_range(index, decisions, 0, size, open_tail=None, keep_chars=keep)
        cached = render_range(
            index, decisions, 0, size, open_tail=None, keep_chars=keep, forms=planner.forms
        )
        assert (cached.messages, cached.tokens, cached.repaired) == (
            fresh.messages,
            fresh.tokens,
            fresh.repaired,
        )


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 40),
    st.frozensets(st.integers(0, 45), max_size=30),
    st.lists(st.integers(0, 45), max_size=12),
    st.integers(0, 40),
)
def test_decisions_list_what_they_show_over_any_range_in_any_order(
    size: int, removed: frozenset[int], starts: list[int], span: int
) -> None:
    decisions = Decisions(removed=removed)
    for start in starts:  # the cache grows in whatever order the ranges are asked for
        stop = min(start + span, size)
        assert list(decisions.shown(start, stop)) == _reference_shown(decisions, start, stop)
    assert list(decisions.shown(0, size)) == _reference_shown(decisions, 0, size)


def _chat(turns: int) -> list[Msg]:
    messages: list[Msg] = [{"role": "user", "content": "start"}]
    for t in range(turns):
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{t}", "tool": "read"}]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": "out " * 40})
        messages.append({"role": "assistant", "content": f"done {t}"})
    return messages


def _plan(messages: list[Msg], removed: frozenset[int], retained: frozenset[int]) -> WorkingPlan:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    return WorkingPlan(index, Decisions(removed=removed), retained, 0)


@settings(max_examples=80, deadline=None)
@given(
    st.frozensets(st.integers(0, 30), max_size=25),
    st.frozensets(st.integers(0, 30), max_size=4),
    st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=12),
)
def test_a_walk_over_what_is_shown_reads_removals_and_put_backs_as_it_goes(
    removed: frozenset[int], retained: frozenset[int], script: list[tuple[int, bool]]
) -> None:
    """``WorkingPlan.shown`` is read like a walk over every position that skips what is left
    out at the moment it gets there: a position put back ahead of it (an out-of-order result
    whose call comes back) is visited, one taken out ahead of it is skipped."""
    messages = _chat(10)
    fast, slow = _plan(messages, removed, retained), _plan(messages, removed, retained)
    walks = (fast.shown(), (p for p in range(slow.size) if p not in slow.removed))
    visited: tuple[list[int], list[int]] = ([], [])
    steps = iter(script)
    for plan, walk, seen in zip((fast, slow), walks, visited, strict=True):
        steps = iter(script)
        for position in walk:
            seen.append(position)
            target, back = next(steps, (None, False))
            if target is None or target >= plan.size:
                continue
            if back and target in plan.removed:
                plan.put_back(target, position)
            elif not back and target > position:
                plan.take_out(target)
            # Read between steps, so a listing remembered from before a change would show.
            assert plan.shown_results() == [
                p for p in plan.shown_list() if plan.index.facts[p].tool_result
            ]
    assert visited[0] == visited[1]
    assert fast.shown_list() == [p for p in range(fast.size) if p not in fast.removed]


def test_a_change_mending_undid_is_no_reduction() -> None:
    plan = _plan(_chat(4), frozenset({4, 5}), frozenset())
    assert not plan.reduced()
    plan.take_out(7)
    assert plan.reduced()
    plan.put_back(7, 6)
    assert not plan.reduced()
    plan.put_back(4, 3)  # left out by base: showing it is a change
    assert plan.reduced()


def test_results_put_back_one_after_another_are_each_listed_as_shown() -> None:
    plan = _plan(_chat(4), frozenset({2, 5, 8, 11}), frozenset())
    assert plan.shown_results() == []
    for result in (2, 5, 8):
        plan.put_back(result, 0)
        assert result in plan.shown_results()
    assert plan.shown_results() == [2, 5, 8]


def test_a_shortened_message_left_out_and_put_back_comes_back_shortened() -> None:
    plan = _plan(_chat(4), frozenset(), frozenset())
    plan.stub(0, 5)
    plan.truncate(2, 40)
    for position in (0, 2):
        plan.take_out(position)
    assert not plan.stubbed and not plan.truncated, "left out, a message is shown in no form"
    for position in (0, 2):
        plan.put_back(position, 1)
    assert (dict(plan.stubbed), dict(plan.truncated)) == ({0: 5}, {2: 40})


def test_a_step_built_late_holds_the_decisions_of_its_moment() -> None:
    plan = _plan(_chat(4), frozenset({1, 2}), frozenset())
    plan.take_out(4)
    plan.take_out(5)
    early = plan.later(3, 1)
    plan.put_back(1, 0)
    plan.take_out(7)
    late = plan.later(3, 1)()
    first = early()
    assert first.removed == {1, 2, 4, 5}
    assert late.removed == {2, 4, 5, 7}
    assert list(first.shown(0, plan.size)) == _reference_shown(first, 0, plan.size)
    assert list(late.shown(0, plan.size)) == _reference_shown(late, 0, plan.size)


def test_remembered_estimates_start_over_when_the_history_is_rewritten_or_retokenized() -> None:
    messages = _chat(3)
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    forms = ShortForms(index)
    position = 2
    first = forms.truncated_tokens(position, 999, 100)
    assert first == estimate_message_tokens(truncated(index.facts[position].sent, 999, 100))
    # The same position now holds another, longer result: its form is weighed again.
    rewritten = [*messages[:position], {**messages[position], "content": "字" * 600}]
    index.sync(rewritten, None)
    again = forms.truncated_tokens(position, 999, 100)
    assert again == estimate_message_tokens(truncated(index.facts[position].sent, 999, 100))
    assert again != first
    # Another tokenizer family estimates differently: nothing remembered under the old one.
    index.sync(rewritten, "claude3")
    other = forms.truncated_tokens(position, 999, 100)
    sent = index.facts[position].sent
    assert other == estimate_message_tokens(truncated(sent, 999, 100), family="claude3")


def test_a_remembered_estimate_is_of_the_form_asked_for() -> None:
    # Asked again with another kept length (the next one the size the last estimate came
    # to), the form and its estimate are that length's own, by both ways of asking.
    index = HistoryIndex(estimate_message_tokens)
    results = [{"role": "tool", "tool_call_id": "c", "content": text}
               for text in ("out, 数据 " * 400, "out " * 40)]  # fmt: skip
    index.sync(results, None)
    forms = ShortForms(index)
    for position, first in ((0, 999), (1, 7)):
        sent = index.facts[position].sent
        keep = first
        for ask in range(6):
            form = truncated(sent, 2_000, keep)
            expected = estimate_message_tokens(form)
            # Each way asked first, in turn: the other then finds the new length remembered.
            if ask % 2:
                assert forms.truncated(position, 2_000, keep) == (form, expected)
            assert forms.truncated_tokens(position, 2_000, keep) == expected
            assert forms.truncated(position, 2_000, keep) == (form, expected)
            keep = expected


async def test_chained_escalations_of_a_long_session_agree_with_the_general_computation() -> None:
    """A fixed long session, so the many-escalation path always runs (hypothesis draws
    mostly short ones)."""
    messages: list[Msg] = [{"role": "user", "content": "task"}]
    for t in range(120):
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{t}", "tool": "read"}]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"{t} " * 900})
        if t % 7 == 6:
            messages.append({"role": "user", "content": f"next {t}"})
    escalations = await _running_session(messages, 12_000, 0.3)
    assert len(escalations) > 5
    for planner, plan, entry, _ in escalations:
        decisions, size, step = plan.decisions, len(planner.index.facts), plan.escalated
        assert list(decisions.shown(0, size)) == _reference_shown(decisions, 0, size)
        assert step.base is entry
        assert decisions.added(entry, step.touched) == decisions.added(entry)
        assert plan.stats.removed_positions == decisions.added(entry)[0]


@settings(max_examples=80, deadline=None)
@given(st.frozensets(st.integers(0, 40), max_size=40), st.sampled_from([0.0, 0.3, 0.6, 1.0]))
def test_the_recent_window_is_the_newest_share_of_what_is_shown(
    removed: frozenset[int], share: float
) -> None:
    """Counted from the end of the history or listed from what is shown (a mostly compacted
    history): the same newest positions."""
    messages: list[Msg] = [{"role": "system", "content": "rules"}, *_chat(13)]
    plan = _plan(messages, removed, frozenset())
    systems = {0}
    shown = [p for p in range(plan.size) if p not in plan.removed and p not in systems]
    count = math.ceil(len(shown) * share)
    assert _recent_floor(plan.index, plan, share) == frozenset(shown[len(shown) - count :])


_Op = tuple[int, bool]
"""(position, True: take it out / False: put it back)."""


@settings(max_examples=150, deadline=None)
@given(
    st.frozensets(st.integers(0, 30), max_size=25),
    st.frozensets(st.integers(0, 34), max_size=6),
    st.lists(st.tuples(st.integers(0, 34), st.booleans()), max_size=25),
    st.integers(0, 25),
)
# Two of the base's positions retained, then both taken out: each counts once in the size.
@example(frozenset({1, 2}), frozenset({1, 2}), [(1, True), (2, True)], 0)
def test_what_a_plan_leaves_out_is_its_base_read_through_the_changes(
    base: frozenset[int], retained: frozenset[int], script: list[_Op], marked_at: int
) -> None:
    """A working plan never copies its base's left-out set: it reads it through what the
    escalation took out and put back. Held, after every change, to a plain set edited the same
    way: membership, size, contents, the frozen decisions, what was taken out since a mark (the
    fit pass's count), and the one C-level filter the walks use."""
    left_out, reference = LeftOut(base, retained), set(base - retained)
    listed = set(range(35)) - base | (retained & base)  # what a plan lists: shown, or put back
    mark, before = left_out.mark(), set(reference)
    for step, (position, out) in enumerate(script):
        if step == marked_at:
            mark, before = left_out.mark(), set(reference)
        if out:
            left_out.add(position)
            reference.add(position)
        else:
            left_out.discard(position)
            reference.discard(position)
            listed.add(position)
        assert [p for p in range(40) if p in left_out] == sorted(reference)
        assert len(left_out) == len(reference)
        assert sorted(left_out) == sorted(reference)
        assert left_out.frozen() == reference
        assert {p for p in range(40) if left_out.membership()(p)} == reference
        assert {p for p in listed if p in left_out.taken} == reference & listed
    if marked_at >= len(script):
        mark, before = left_out.mark(), set(reference)
    assert left_out.since(mark) == reference - before


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_a_position_put_back_and_taken_out_again_counts_once(rounds: int) -> None:
    # The base leaves out 0..4; 2 is put back (retained), then taken out and put back again,
    # ``rounds`` times: the size follows a plain set's through every change.
    left_out, reference = LeftOut(frozenset(range(5)), {2}), {0, 1, 3, 4}
    for _ in range(rounds):
        left_out.add(2)
        reference.add(2)
        assert len(left_out) == len(reference) == 5
        left_out.discard(2)
        reference.discard(2)
        assert len(left_out) == len(reference) == 4
        assert sorted(left_out) == sorted(reference)


@settings(max_examples=80, deadline=None)
@given(
    st.frozensets(st.integers(0, 30), max_size=25),
    st.frozensets(st.integers(0, 30), max_size=4),
    st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=15),
)
def test_the_decisions_a_plan_builds_leave_out_what_its_edits_did(
    removed: frozenset[int], retained: frozenset[int], script: list[_Op]
) -> None:
    """Built now, built late (from the touched positions only) or listed as shown: the same
    positions a plain set edited the same way holds (results of calls left out hidden)."""
    messages = _chat(10)
    plan = _plan(messages, removed, retained)
    reference = set(removed - retained)
    # The results whose calls are left out when the plan is made are hidden with them.
    reference.update(r for r, c in plan.index.pairing.owner_of.items() if c in removed - retained)
    for position, out in script:
        if out:
            plan.take_out(position)
            reference.add(position)
        elif position in plan.removed:
            plan.put_back(position, 0)
            reference.discard(position)
    later = plan.later(3, 1)()
    now = plan.decisions(3, 1)
    assert later.removed == now.removed == reference
    for decisions in (later, now):
        assert list(decisions.shown(0, plan.size)) == _reference_shown(decisions, 0, plan.size)
    assert plan.shown_list() == [p for p in range(plan.size) if p not in reference]
    assert plan.shown_results() == [
        p for p in range(plan.size) if p not in reference and plan.index.facts[p].tool_result
    ]


@settings(max_examples=80, deadline=None)
@given(
    st.frozensets(st.integers(0, 36), max_size=20),
    st.lists(st.integers(0, 36), max_size=4),
    st.floats(0.3, 1.0),
    st.floats(0.0, 0.6),
)
def test_the_fit_pass_counts_only_what_it_took_itself(
    removed: frozenset[int], back: list[int], rungs: float, fit: float
) -> None:
    """What the fit pass reports (and marks relaxed) is what it left out or shortened beyond
    the rungs before it: compared with the plan read whole before and after it."""
    messages = _chat(12)
    plan = _plan(messages, removed, frozenset())
    keep, size = 40, plan.size
    for position in back:  # mending may have shown some of the base again
        if position in plan.removed:
            plan.put_back(position, 0)
    plan.usage = sum(plan.rendered_tokens(p, keep) for p in plan.shown_list())
    _remove(plan, frozenset(), int(plan.usage * rungs), keep)  # a rung before the fit pass
    removed_before = {p for p in range(size) if p in plan.removed}
    truncated_before = set(plan.truncated)
    shortened, groups = _relax(plan, frozenset({size - 1}), int(plan.usage * fit), keep, None)
    taken = {p for p in range(size) if p in plan.removed} - removed_before
    owner_of = plan.index.pairing.owner_of
    assert groups == sum(1 for p in taken if p not in owner_of)
    assert shortened == len(set(plan.truncated) - truncated_before - taken)
    assert taken <= plan.relaxed
    # Only what is shown was shortened (a left-out result is never a candidate).
    assert not any(p in plan.removed for p in plan.truncated)


@settings(max_examples=80, deadline=None)
@given(
    st.frozensets(st.integers(0, 36), max_size=20),
    st.lists(st.tuples(st.integers(0, 36), st.booleans()), max_size=8),
)
def test_a_rung_shortens_every_result_shown_and_none_left_out(
    removed: frozenset[int], script: list[_Op]
) -> None:
    """Whether the rung reads the results from what is shown or filters every result (a base
    that leaves out little): exactly the results a plain set says are shown are shortened."""
    messages = _chat(12)
    for message in messages:
        if message["role"] == "tool":
            message["content"] = "out " * 400
    plan = _plan(messages, removed, frozenset())
    for position, out in script:
        if out:
            plan.take_out(position)
        elif position in plan.removed:
            plan.put_back(position, 0)
    reference = {p for p in range(plan.size) if p in plan.removed}
    plan.usage = 10**9
    _truncate(plan, frozenset(), 1.0, 0, 40)
    results = plan.index.tool_result_positions
    assert set(plan.truncated) == {p for p in results if p not in reference}


def test_a_stub_quotes_the_head_of_its_message_with_the_quotes_inside_made_single() -> None:
    message = {"role": "user", "content": 'Rename "old_name" to "new_name" everywhere. ' * 40}
    stub = stubbed(message)
    assert stub["content"] == (
        "[User message compacted - original: \"Rename 'old_name' to 'new_name' everywhere. "
        'Rename..."]'
    )


def test_a_stub_quotes_every_text_of_its_message_and_the_results_it_carries() -> None:
    # Text blocks are joined; a result block is read for its payload, a list of texts too.
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "See the log."},
            {"type": "text", "text": "Then fix it."},
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"text": "ok"}, {}]},
            {"type": "tool_result", "tool_use_id": "c2", "output": "done"},
        ],
    }
    stub = stubbed(message)
    assert "See the log.\nThen fix it.\nok\n\ndone" in stub["content"]
    assert stub["_original_length"] == len("See the log.\nThen fix it.\nok\n\ndone")


@pytest.mark.parametrize("keep", [0, 40, 250])
def test_a_result_is_shortened_only_where_that_saves_more_than_the_marker_costs(keep: int) -> None:
    # The marker and the ellipsis take about 120 characters: a text no longer than the kept
    # part and those is left whole.
    assert not can_truncate({"role": "tool", "content": "x" * (keep + 120)}, keep)
    assert can_truncate({"role": "tool", "content": "x" * (keep + 121)}, keep)


def test_a_shortened_user_turn_keeps_its_text_and_shortens_each_result_to_their_head() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "alpha " * 50},
            {"type": "text", "text": "Also, keep the tests green."},
        ],
    }
    short = truncated(message, 300, 12)["content"]
    head = "[truncated: ~300 tokens - call tool again if needed] alpha alpha ..."
    assert short == [
        {"type": "tool_result", "tool_use_id": "a", "content": head},
        {"type": "text", "text": "Also, keep the tests green."},
    ]


@pytest.mark.parametrize(
    ("message", "leads"),
    [
        ({"role": "tool", "tool_call_id": "a"}, True),
        ({"role": "tool"}, False),
        ({"role": "user", "tool_call_id": "a"}, False),
    ],
)
def test_only_a_tool_message_with_its_own_id_leads_its_shortened_blocks_with_the_text(
    message: dict[str, Any], leads: bool
) -> None:
    # A tool message answers by its id: its text goes first, for providers that read that; a
    # message answered by its blocks alone keeps only the blocks.
    block = {"type": "tool_result", "tool_use_id": "a", "content": "beta " * 50}
    head = "[truncated: ~9 tokens - call tool again if needed] beta beta ..."
    text = [{"type": "text", "text": head}] if leads else []
    short = truncated({**message, "content": [block]}, 9, 10)["content"]
    assert short == [*text, {**block, "content": head}]


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"content": "x" * 300}, "content"), ({"output": "x" * 300}, "output"),
     ({"output": "x" * 300, "content": "y"}, "output"), ({}, "output")],
)  # fmt: skip
def test_a_shortened_result_block_carries_its_head_in_the_field_it_uses(
    payload: dict[str, Any], field: str
) -> None:
    # The host's own field (``output``) wins; a block with neither gets the host's.
    block = {"type": "tool_result", "tool_use_id": "a", **payload}
    [short] = truncated({"role": "user", "content": [block]}, 9, 10)["content"]
    assert short[field].startswith("[truncated: ~9 tokens")
    assert {k: v for k, v in short.items() if k != field} == {
        k: v for k, v in block.items() if k != field
    }
