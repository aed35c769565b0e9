"""Rules of the view modules that injected bugs went past (issue 28 §4), pinned one by one.

Turn mending (``_turns``) on the pure core: a system message or an orphan result between a
call and the prompt after it, a hook reminder right before a protected prompt; the working
plan (``_working``): mending brings a message back exactly as short as it was; the projection
(``_project``): a bare-string block is reported as the ``text`` repair, and values nested too
deep keep their other scalars; the turn reader (``_turn_rule``) on its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import pytest

from amplifier_module_context_simple import check_view, estimate_message_tokens
from amplifier_module_context_simple.checks._invariants import ViewChecker
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.history._ids import IdAssigner
from amplifier_module_context_simple.history._project import DEEPER, TEXT, json_text, project
from amplifier_module_context_simple.history._turn_rule import TurnReader
from amplifier_module_context_simple.views._decisions import Decisions
from amplifier_module_context_simple.views._protection import (
    newest,
    prompts_and_opening,
    rest_of_turns,
    turn_opening,
)
from amplifier_module_context_simple.views._render import stubbed
from amplifier_module_context_simple.views._turns import after_rewrite, mend_turns
from amplifier_module_context_simple.views._working import WorkingPlan
from amplifier_module_context_simple.vocabulary._messages import MAX_DEPTH

from ..provider_rules import anthropic_violations

Msg = dict[str, Any]


def prompt(body: str) -> Msg:
    return {"role": "user", "content": body}


def reminder(body: str) -> Msg:
    return {"role": "user", "content": body, "metadata": {"source": "hook"}}


def answer(body: str, *, thinking: bool = False) -> Msg:
    if not thinking:
        return {"role": "assistant", "content": body}
    block = {"type": "thinking", "thinking": f"on {body}", "signature": f"sig-{body}"}
    return {"role": "assistant", "content": [block, {"type": "text", "text": body}]}


def call(call_id: str, *, thinking: bool = False) -> Msg:
    message = answer("", thinking=thinking) if thinking else {"role": "assistant", "content": ""}
    return {**message, "tool_calls": [{"id": call_id, "tool": "read"}]}


def result(call_id: str, size: int = 1) -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": f"output of {call_id} " * size}


def index_of(messages: Sequence[Msg]) -> HistoryIndex:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(list(messages), None)
    return index


def plan_for(messages: Sequence[Msg], decisions: Decisions) -> WorkingPlan:
    index = index_of(messages)
    usage = sum(f.tokens for i, f in enumerate(index.facts) if i not in decisions.removed)
    return WorkingPlan(index, decisions, frozenset(), usage)


def mend(messages: Sequence[Msg], removed: set[int], protected: set[int]) -> WorkingPlan:
    plan = plan_for(messages, Decisions(removed=frozenset(removed)))
    mend_turns(plan, frozenset(protected), 250, None)
    return plan


# --- _turns -----------------------------------------------------------------------------------


def test_a_system_message_between_a_round_and_a_prompt_opens_no_gap() -> None:
    # H0, c1, T1, S, H1: the system message is lifted out, so H1 followed T1 in the history too.
    messages = [prompt("H0"), call("c1"), result("c1"), {"role": "system", "content": "s"}]
    messages.append(prompt("H1"))
    plan = mend(messages, {3}, {0})
    assert plan.removed == {3} and not plan.changed


def test_an_orphan_result_between_a_round_and_a_prompt_opens_no_gap() -> None:
    # H0, c1, T1, orphan, H1: the orphan is never sent, left out or not.
    messages = [prompt("H0"), call("c1"), result("c1"), result("nobody"), prompt("H1")]
    plan = mend(messages, {3}, {0})
    assert 4 not in plan.removed and not plan.changed


def test_a_left_out_answer_is_a_gap_even_behind_a_system_message() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A")]
    messages += [{"role": "system", "content": "s"}, prompt("H1"), answer("B")]
    plan = mend(messages, {3}, {0})
    assert 5 in plan.removed


def test_a_reminder_right_before_a_protected_prompt_is_looked_past() -> None:
    # H0, c1, T1, [A], R, P (protected): the walk back from P looks past the reminder and
    # brings A back; the reminder itself stays as it was (left out).
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), reminder("R"), prompt("P")]
    plan = mend(messages, {3, 4}, {0, 5})
    assert plan.removed == {4}
    assert plan.restored == {3: 1}


def test_a_left_out_reminder_opens_no_gap() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), reminder("R"), prompt("H1")]
    plan = mend(messages, {3}, {0})
    assert 4 not in plan.removed and not plan.changed


def test_the_floor_keeps_the_prompt_a_person_typed_in_the_opening_user_turn() -> None:
    # H, A, [R, H2], A*[c], T, H3 typed after the result: the turn opens after R+H2; the floor
    # keeps H2 (what a person typed), not the reminder, the answer it follows and the opener.
    messages = [prompt("H"), answer("A"), reminder("R"), prompt("H2")]
    messages += [call("c", thinking=True), result("c"), prompt("H3")]
    assert turn_opening(index_of(messages)) == {1, 3, 4}


@pytest.mark.parametrize("results", [1, 2])
def test_a_prompt_typed_right_after_a_result_keeps_the_round_it_merges_into(results: int) -> None:
    # H, A*[o], T, A[a, a2?], T (, T2), H2 typed right after the result, A[b] without thinking:
    # H2 joins the user turn of round a's results, so the provider reads the active turn on
    # through it. Left out, round a would leave H2 a user turn of its own, and the turn would
    # open at A[b], which has no thinking. The floor keeps that round (its call).
    ids = ["a", "a2"][:results]
    round_a = {**call("a"), "tool_calls": [{"id": i, "tool": "read", "arguments": {}} for i in ids]}
    messages = [prompt("H"), call("o", thinking=True), result("o"), round_a]
    messages += [result(i) for i in ids]
    messages += [prompt("H2"), call("b"), result("b")]
    assert turn_opening(index_of(messages)) == {0, 1, 3}


def test_the_newest_message_is_pinned_unless_it_is_a_result() -> None:
    messages = [prompt("H"), call("c"), result("c")]
    assert newest(index_of(messages)) is None
    assert newest(index_of([*messages, answer("A"), reminder("R")])) == 3


def test_the_rest_of_a_kept_rounds_turn_runs_to_the_next_prompt() -> None:
    messages = [prompt("H"), call("c1"), result("c1"), call("c2"), result("c2"), answer("A")]
    messages += [prompt("H2"), call("c3"), result("c3")]
    assert rest_of_turns(index_of(messages), [2]) == {2, 3, 4, 5}
    assert rest_of_turns(index_of(messages), [2, 8]) == {2, 3, 4, 5, 8}


def test_mending_keeps_the_opening_prompt_even_when_the_caller_does_not() -> None:
    # H0, c0, T0, [A0], H1, c1*, T1, H2 typed after the result: the provider reads the active
    # turn from H1, which would land in c0's round; mending brings A0 back instead of
    # taking H1 out, although the caller protects nothing.
    messages = [prompt("H0"), call("c0"), result("c0"), answer("A0"), prompt("H1")]
    messages += [call("c1", thinking=True), result("c1"), prompt("H2")]
    plan = mend(messages, {3}, set())
    assert plan.removed == set()


def test_a_call_nobody_answered_opens_a_round_a_prompt_can_land_in() -> None:
    # H0, c0 (interrupted: no result), [A0], H1: the view answers c0 with a placeholder, so
    # H1 would land in its round.
    messages = [prompt("H0"), call("c0"), answer("A0"), prompt("H1"), answer("B")]
    plan = mend(messages, {2}, {0})
    assert 3 in plan.removed


def test_after_a_rewrite_a_restored_opening_prompt_is_mended_into_place() -> None:
    # H0, c0, T0, A0, H1, c1*, T1, H2 typed after the result. An earlier escalation left out
    # A0..T1; the rewrite makes H1's turn the active one: H1, c1* and T1 come back, and so
    # does A0, or H1 would land in c0's round.
    messages = [prompt("H0"), call("c0"), result("c0"), answer("A0"), prompt("H1")]
    messages += [call("c1", thinking=True), result("c1"), prompt("H2")]
    old = Decisions(removed=frozenset({3, 4, 5, 6}))
    assert after_rewrite(index_of(messages), old, 8, 250).removed == frozenset()


def test_mending_never_takes_out_the_active_turns_opening() -> None:
    # H0, c1*, T1, [c2, T2], H1 typed after the result: the provider reads the turn from H0,
    # so H0 and c1* stay whatever the caller protects.
    messages = [prompt("H0"), call("c1", thinking=True), result("c1"), prompt("H1")]
    index = index_of(messages)
    assert turn_opening(index) == {0, 1}
    plan = mend(messages, set(), set())
    assert plan.removed == set()


def test_after_a_rewrite_the_opening_comes_back_shortened_as_it_was_only_if_needed() -> None:
    messages = [prompt("H0"), call("c1", thinking=True), result("c1"), answer("A")]
    messages += [call("c2"), result("c2"), prompt("H1")]
    index = index_of(messages)
    decisions = Decisions(removed=frozenset({1, 2}), level=3, escalations=2)
    kept = after_rewrite(index, decisions, 6, 250)
    assert kept.removed == frozenset() and (kept.level, kept.escalations) == (3, 2)
    shortened = Decisions(truncated=MappingProxyType({2: 99}), stubbed=MappingProxyType({0: 9}))
    kept = after_rewrite(index, shortened, 6, 250)
    assert (dict(kept.truncated), dict(kept.stubbed)) == ({}, {}), "shown whole again"
    untouched = Decisions(removed=frozenset({4, 5}), level=3, escalations=2)
    assert after_rewrite(index, untouched, 6, 250) == untouched
    assert after_rewrite(index, untouched, 5, 250).removed == frozenset({4})


# --- _working ---------------------------------------------------------------------------------


def test_mending_brings_a_message_back_exactly_as_short_as_it_was() -> None:
    messages = [prompt("H0"), call("c1"), result("c1", 400), answer("A"), prompt("P")]
    plan = plan_for(messages, Decisions(truncated=MappingProxyType({3: 99})))
    shortened = plan.rendered_tokens(3, 250)
    plan.take_out(3)
    assert 3 in plan.removed and 3 not in plan.truncated
    plan.put_back(3, 1)
    assert plan.truncated == {3: 99} and plan.rendered_tokens(3, 250) == shortened
    stubbed = plan_for(messages, Decisions(stubbed=MappingProxyType({3: 7})))
    stubbed.take_out(3)
    stubbed.put_back(3, 1)
    assert stubbed.stubbed == {3: 7} and stubbed.truncated == {}


def test_a_message_left_out_before_the_plan_comes_back_whole() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("P")]
    plan = plan_for(messages, Decisions(removed=frozenset({3}), relaxed=frozenset({3})))
    plan.put_back(3, 1)
    assert 3 not in plan.removed and 3 not in plan.relaxed
    assert plan.truncated == {} and plan.stubbed == {}
    assert plan.locked(3)
    plan.removed.add(1)
    assert not plan.locked(3)


# --- _project ---------------------------------------------------------------------------------


def test_a_bare_string_block_is_sent_as_text_and_reported() -> None:
    message = {"role": "user", "content": ["plain words", {"type": "text", "text": "block"}]}
    sent, kinds = project(message, IdAssigner().add(message, 0), json_cap=131_072)
    assert sent["content"][0] == {"type": "text", "text": "plain words"}
    assert sent["content"][1] == {"type": "text", "text": "block"}
    assert kinds == (TEXT,)


def test_values_nested_too_deep_keep_their_other_scalars() -> None:
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH + 5_000):
        deep = [deep]
    value = {"name": "trace", "count": 3, "ok": True, "nested": deep}
    text = json_text(value)
    decoded = json.loads(text)
    assert (decoded["name"], decoded["count"], decoded["ok"]) == ("trace", 3, True)
    assert DEEPER in text
    # MAX_DEPTH levels of containers are kept (the mapping and the lists below it), and the
    # container one level further down is what DEEPER stands for.
    levels, node = 1, decoded["nested"]
    while isinstance(node, list):
        levels, node = levels + 1, node[0]  # pyright: ignore[reportUnknownVariableType]
    assert (levels, node) == (MAX_DEPTH, DEEPER)


# --- _turn_rule -------------------------------------------------------------------------------


def test_the_reader_on_its_own() -> None:
    reader = TurnReader()
    assert reader.active().opener is None and not reader.in_round
    for position, part in enumerate(["lifted", "user", "assistant", "user"]):
        reader.feed(position, part)  # type: ignore[arg-type]
    assert reader.active().anchor == (3,) and reader.active().opener is None
    other = reader.copy()
    other.feed(4, "user")  # the copy's pending user turn is its own too
    assert reader.active().anchor == (3,) and other.active().anchor == (3, 4)
    assert other.active().follows == 2  # and it knows which answer that turn follows
    twin = reader.copy()
    twin.feed(4, "calls")
    assert reader.active().opener is None  # the copy is its own
    assert twin.in_round and twin.active().opener == 4 and twin.active().anchor == (3,)
    twin.feed(5, "result")
    twin.feed(6, "user")  # a prompt typed after the result merges into it
    twin.feed(7, "assistant")
    assert twin.active().anchor == (3,) and twin.active().opener == 4
    twin.feed(8, "user")
    twin.feed(9, "user")
    assert twin.active().anchor == (8, 9)


# --- _invariants: the history's turns as check_view reads them ----------------------------------


def test_an_orphan_result_does_not_hide_where_thinking_was_turned_on() -> None:
    # H0, A0 (thinking off), orphan, H1, c1* (thinking on from here), T1, H2 typed after it.
    # The orphan is never sent: H1 opens the latest turn, whose opener carries thinking, so a
    # view whose active turn opens with A0 is refused.
    history = [prompt("H0"), answer("A0"), result("nobody"), prompt("H1")]
    history += [call("c1", thinking=True), result("c1"), prompt("H2")]
    view = [history[0], history[1], history[4], history[5], history[6]]
    assert any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True))
    assert any("active turn" in p for p in check_view(view, history=history))


def test_a_late_result_is_a_result_wherever_it_sits() -> None:
    # H0, c0*, A1, T0 answering c0 late, A2: T0 is no user turn of its own, so the latest
    # turn still opens with c0* and a view that opens it with A1 is reported.
    history = [prompt("H0"), call("c0", thinking=True), answer("A1"), result("c0"), answer("A2")]
    view = [history[0], history[2], history[4]]
    assert any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True))
    assert any("active turn" in p for p in check_view(view, history=history))


def test_a_reasoning_item_before_the_thinking_block_is_not_what_the_provider_reads() -> None:
    reasoning = {"type": "reasoning", "content": [], "summary": []}
    opener = answer("A0", thinking=True)
    opener["content"] = [reasoning, *opener["content"]]
    history = [prompt("H0"), opener, prompt("H1"), call("c1", thinking=True), result("c1")]
    history.append(prompt("H2"))
    view = [history[0], history[1], history[3], history[4], history[5]]
    assert not any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True))
    assert check_view(view, history=history) == []


def test_the_view_checker_reads_turns_from_where_the_previous_view_ended() -> None:
    # The previous view ended with a notice (a user message no person typed) that the next
    # view replaces: the checker goes on from its scan before the notice, whose turns must
    # not have read the notice.
    history = [prompt("H0"), answer("A0", thinking=True), answer("A1")]
    notice = reminder("<system-reminder>compacted</system-reminder>")
    checker = ViewChecker()
    assert checker.check([*history, notice], history) == check_view(
        [*history, notice], history=history
    )
    grown = [*history, answer("A2")]
    assert checker.check(grown, grown) == check_view(grown, history=grown) == []


# --- _project: images and renamed result blocks -------------------------------------------------


def test_a_data_url_image_keeps_its_media_type() -> None:
    url = "data:image/jpeg;base64,/9j/4AAQ"
    message = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    sent, _ = project(message, IdAssigner().add(message, 0), json_cap=131_072)
    source = sent["content"][0]["source"]
    assert source == {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}


def test_a_result_block_answering_a_reused_id_carries_the_derived_id() -> None:
    def answered(call_id: str) -> Msg:
        block = {"type": "tool_result", "tool_call_id": call_id, "output": "done"}
        return {"role": "user", "content": [block]}

    history = [prompt("H"), call("x"), answered("x"), call("x"), answered("x")]
    index = index_of(history)
    [derived] = index.facts[3].calls
    assert derived != "x"
    assert index.facts[4].sent["content"][0]["tool_call_id"] == derived
    assert index.facts[2].sent["content"][0]["tool_call_id"] == "x"


# --- _view_scan and _working: rules the first round of injected bugs went past -------------------


def test_a_prompt_after_a_result_and_a_reminder_is_read_inside_that_round() -> None:
    # H0, c, T, R, A, H1: a view without A puts H1 after T (through the reminder).
    history = [prompt("H0"), call("c"), result("c"), reminder("R"), answer("A"), prompt("H1")]
    view = [history[0], history[1], history[2], history[3], history[5]]
    assert any("directly follows a tool result" in p for p in check_view(view, history=history))


def test_a_second_result_for_one_call_is_named_as_such() -> None:
    history = [prompt("H0"), call("c"), result("c")]
    again = result("c")
    assert any("second result" in p for p in check_view([*history, again]))


def test_retained_positions_are_shown_whole_in_the_working_plan() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), reminder("R" * 400), prompt("P")]
    index = index_of(messages)
    base = Decisions(removed=frozenset({1, 2}), stubbed=MappingProxyType({3: 400}))
    plan = WorkingPlan(index, base, frozenset({1, 2, 3}), 0)
    assert plan.removed == set() and plan.stubbed == {}


def test_a_stub_is_priced_as_the_stub_not_the_original() -> None:
    messages = [prompt("H0"), answer("A"), reminder("R " * 2_000), prompt("P")]
    plan = plan_for(messages, Decisions(stubbed=MappingProxyType({2: 4_000})))
    stub = plan.rendered_tokens(2, 250)
    assert stub == estimate_message_tokens(stubbed(plan.index.facts[2].sent))
    assert stub < plan.index.facts[2].tokens


def test_the_latest_prompts_own_thinking_round_stays_in_the_floor() -> None:
    # H0, c0*, T0, H1 typed after the result, R, c1*, T1: the provider reads the turn from
    # c0*, but c1* is the round H1 is waiting on (past the reminder that merged into H1).
    messages = [prompt("H0"), call("c0", thinking=True), result("c0"), prompt("H1")]
    messages += [reminder("R"), call("c1", thinking=True), result("c1")]
    assert prompts_and_opening(index_of(messages)) == {0, 1, 3, 5}
    messages[5] = call("c1")  # without thinking it is not kept for it
    assert prompts_and_opening(index_of(messages)) == {0, 1, 3}
