"""ViewChecker: check_view's verdict on a growing history, without re-reading the history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager, check_view
from amplifier_module_context_simple.checks._invariants import (
    ViewChecker,
    sent_forms,
    shared_start,
)
from amplifier_module_context_simple.replay.recordings.example_session import generate_session

from ..vocabulary.test_messages import conversations

THINKING_CALL = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "tool_call", "id": "a", "name": "t", "input": {}},
    ],
}


def _views(history: list[dict[str, Any]], picks: list[int]) -> list[list[Any]]:
    """Views worth checking: the history as sent, a suffix, a subset, one with a repeat."""
    sent = sent_forms(history)
    pool = [*history, *sent]
    chosen = [pool[p % len(pool)] for p in picks]
    return [sent, sent[len(sent) // 2 :], chosen, [*sent[:2], *sent[:1]]]


@settings(max_examples=60, deadline=None)
@given(conversations(), st.lists(st.integers(0, 10_000), max_size=8), st.data())
def test_same_verdict_as_check_view_as_the_history_grows(
    case: tuple[list[dict[str, Any]], list[list[int]]], picks: list[int], data: st.DataObject
) -> None:
    messages, _ = case
    extra = data.draw(st.sampled_from([[], [{"role": "user", "content": "more"}], [THINKING_CALL]]))
    history = [*messages, *extra, {"role": "user", "content": "again"}]
    checker = ViewChecker()
    for k in range(1, len(history) + 1):
        grown = history[:k]
        for view in _views(grown, picks):
            assert checker.check(view, grown) == check_view(view, history=grown)


def test_a_generated_session_checked_at_every_step() -> None:
    history = generate_session(160, seed=3)
    checker = ViewChecker()
    found_any = False
    for k in range(1, len(history) + 1, 7):
        grown = history[:k]
        for view in _views(grown, [k, 3 * k, 5 * k + 1]):
            expected = check_view(view, history=grown)
            found_any = found_any or bool(expected)
            assert checker.check(view, grown) == expected
    assert found_any, "the views include invalid ones, so the check is not vacuous"


def test_a_prompt_allowed_later_by_the_history_is_no_longer_flagged() -> None:
    # The same rendered prompt after a tool result: refused while the history has it only
    # after a plain answer, accepted once the history also has it after a tool round.
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "tool": "t"}]}
    result = {"role": "tool", "tool_call_id": "c", "content": "r"}
    prompt = {"role": "user", "content": "next"}
    before = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}, prompt]
    view = [*sent_forms([*before, call, result]), prompt]
    checker = ViewChecker()
    assert checker.check(view, before) == check_view(view, history=before) != []
    after = [*before, call, result, dict(prompt)]
    assert checker.check(view, after) == check_view(view, history=after)


def test_a_history_that_does_not_extend_the_last_one_is_read_again() -> None:
    first = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "a"}]
    other = [{"role": "user", "content": "two"}, {"role": "assistant", "content": "b"}]
    checker = ViewChecker()
    assert checker.check(sent_forms(first), first) == []
    # Same length, different messages: the first prompt is now "two".
    assert checker.check(sent_forms(first), other) == check_view(sent_forms(first), history=other)
    assert checker.check(sent_forms(first), other) != []
    shorter = other[:1]
    assert checker.check(sent_forms(shorter), shorter) == []


NOTICE = {"role": "user", "content": "[compacted]", "metadata": {"source": "compaction_notice"}}


@settings(max_examples=60, deadline=None)
@given(conversations(), st.lists(st.sampled_from(["grow", "notice", "drop", "dup"]), max_size=12))
def test_views_that_extend_the_previous_one_get_check_views_verdict(
    case: tuple[list[dict[str, Any]], list[list[int]]], steps: list[str]
) -> None:
    # A replay's views re-send the previous view's objects and add at the end, with a notice
    # that is replaced on the next request; the checker scans only what was added.
    messages, _ = case
    history = [*messages, {"role": "user", "content": "again"}, THINKING_CALL]
    sent = sent_forms(history)
    checker = ViewChecker()
    view: list[Any] = []
    for k, step in enumerate(steps * 2, 1):
        grown = history[: min(k, len(history))]
        body = [m for m in view if m is not NOTICE]
        if step == "grow":
            view = [*body, *sent[len(body) : len(grown)]]
        elif step == "notice":
            view = [*body, NOTICE]
        elif step == "drop" and body:
            view = body[1:]
        elif step == "dup" and body:
            view = [*body, body[0]]
        assert checker.check(view, grown) == check_view(view, history=grown)


def test_a_sticky_replay_reports_a_problem_in_the_added_part() -> None:
    history = generate_session(60, seed=5)
    sent = sent_forms(history)
    checker = ViewChecker()
    for k in range(1, 50):
        assert checker.check(sent[:k], history[:k]) == check_view(sent[:k], history=history[:k])
    stray = {"role": "tool", "tool_call_id": "nowhere", "content": "x"}
    problems = checker.check([*sent[:49], stray], history[:49])
    assert any("'nowhere' does not directly follow" in p for p in problems)
    assert problems == check_view([*sent[:49], stray], history=history[:49])


def _turn_with_a_reminder_after_the_prompt() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "fix it"},
        {
            "role": "user",
            "content": "<system-reminder>a hook's note</system-reminder>",
            "metadata": {"source": "hook"},
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "s"},
                {"type": "tool_call", "id": "c0", "name": "read", "input": {}},
            ],
            "tool_calls": [{"id": "c0", "tool": "read", "arguments": {}}],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "out 0"},
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "read", "input": {}}],
            "tool_calls": [{"id": "c1", "tool": "read", "arguments": {}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "out 1"},
    ]


def test_the_active_turns_opener_is_found_past_a_reminder_after_the_prompt() -> None:
    history = _turn_with_a_reminder_after_the_prompt()
    sent = sent_forms(history)
    assert check_view(sent, history=history) == []
    # Without the thinking round the turn opens with a round a thinking provider refuses.
    problems = check_view([*sent[:2], *sent[4:]], history=history)
    assert any("does not open with the history's thinking" in p for p in problems), problems
    checker = ViewChecker()
    assert checker.check([*sent[:2], *sent[4:]], history) == problems


POOL = [{"n": i} for i in range(4)]  # equal-looking dicts are other messages: identity counts


@given(st.lists(st.integers(0, 3), max_size=6), st.lists(st.integers(0, 3), max_size=7))
@example([0, 1], [0, 2])  # all of the last view but its last message, which is replaced
def test_shared_start_is_all_of_the_last_view_or_all_but_its_last_message(
    before: list[int], after: list[int]
) -> None:
    previous, view = [POOL[i] for i in before], [POOL[i] for i in after]
    view_copies = [dict(m) for m in view]
    n = len(previous)

    def resends(k: int) -> bool:
        return len(view) >= k and all(a is b for a, b in zip(previous[:k], view, strict=False))

    expected = n if n and resends(n) else n - 1 if n > 1 and resends(n - 1) else 0
    assert shared_start(previous, view) == expected
    assert shared_start(previous, view_copies) == 0 or not previous


WIZARD = {"role": "user", "content": [{"type": "wizard", "spell": "w" * 3_000}]}


def test_a_checker_with_its_own_cap_reads_a_foreign_block_as_check_view_does_after_a_reset() -> (
    None
):
    # Sent as a placeholder under a 1,000-byte cap, as its JSON under the default one.
    history = [WIZARD, {"role": "assistant", "content": "seen"}]
    small = sent_forms(history, json_cap=1_000)
    assert small != sent_forms(history)
    checker = ViewChecker(json_cap=1_000)
    assert checker.check(small, history) == check_view(small, history=history, json_cap=1_000)
    assert checker.check(small, history) == []
    # A history that does not extend the last one is read again, under the same cap.
    other = [dict(WIZARD), {"role": "assistant", "content": "seen again"}]
    again = sent_forms(other, json_cap=1_000)
    assert checker.check(again, other) == check_view(again, history=other, json_cap=1_000) == []


def test_an_empty_view_of_an_empty_history_is_valid() -> None:
    assert ViewChecker().check([], []) == check_view([], history=[]) == []


def test_a_history_whose_new_head_is_the_old_last_message_is_read_again() -> None:
    one = {"role": "user", "content": "one"}
    answer = {"role": "assistant", "content": "a"}
    two = {"role": "user", "content": "two"}
    checker = ViewChecker()
    assert checker.check(sent_forms([one, answer]), [one, answer]) == []
    # The last message checked now opens a new history: it is no longer the one at its old
    # position, so nothing read of the old history (its first prompt, "one") holds.
    other = [answer, two, {"role": "assistant", "content": "b"}]
    view = sent_forms(other)
    assert checker.check(view, other) == check_view(view, history=other) == []


REMINDER = {
    "role": "user",
    "content": "<system-reminder>a hook's note</system-reminder>",
    "metadata": {"source": "hook"},
}
LATE_RULES = {"role": "system", "content": "late rules"}


@pytest.mark.parametrize("tail", [[REMINDER, REMINDER], [LATE_RULES, REMINDER], [REMINDER]])
def test_views_that_drop_their_last_messages_one_by_one_get_check_views_verdict(
    tail: list[dict[str, Any]],
) -> None:
    # A view that re-sends all of the last one but its last message (one that merges into
    # the turn around it: a reminder, the notice) is fed on from the scan kept before that
    # message; one that re-sends less is scanned whole. A system message after the
    # conversation, or a repeated reminder, is a problem the kept scans must not lose.
    history = generate_session(40, seed=7)
    view = [*sent_forms(history), *tail]
    checker = ViewChecker()
    verdicts: list[list[str]] = []
    for _ in range(len(tail) + 3):
        expected = check_view(view, history=history)
        assert checker.check(view, history) == expected
        verdicts.append(expected)
        view = view[:-1]
    assert verdicts[0] != [] or len(tail) == 1, "the tail is a problem, so the check is not vacuous"


async def test_sent_forms_give_calls_without_ids_the_ids_the_view_sends() -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
    for k in range(3):
        history.append(
            {"role": "assistant", "content": "", "tool_calls": [{"tool": "read", "arguments": {}}]}
        )
        history.append({"role": "tool", "content": f"out {k}"})
    history.append({"role": "assistant", "content": "done"})
    manager = SimpleContextManager()
    for message in history:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert [m.get("tool_calls") for m in sent_forms(history)] == [m.get("tool_calls") for m in view]
    assert check_view(view, history=history) == []
