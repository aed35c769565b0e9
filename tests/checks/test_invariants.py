"""check_view: each rule fires on a view that breaks it, and stays quiet on valid views."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from amplifier_module_context_simple import check_view
from amplifier_module_context_simple.checks._invariants import ViewChecker, sent_forms

from ..vocabulary.test_messages import conversations

CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "a", "tool": "t", "arguments": {}},
        {"id": "b", "tool": "t", "arguments": {}},
    ],
}
RES_A = {"role": "tool", "tool_call_id": "a", "content": "1"}
RES_B = {"role": "tool", "tool_call_id": "b", "content": "2"}
USER = {"role": "user", "content": "go"}


def test_valid_view_has_no_violations() -> None:
    assert check_view([{"role": "system", "content": "s"}, USER, CALL, RES_A, RES_B]) == []


def test_unanswered_tail_is_allowed() -> None:
    assert check_view([USER, CALL]) == []
    assert check_view([USER, CALL, RES_A]) == []


def test_leading_orphan_result() -> None:
    assert any("does not directly follow" in p for p in check_view([RES_A, USER]))


def test_call_without_all_results_mid_view() -> None:
    problems = check_view([USER, CALL, RES_A, {"role": "user", "content": "next"}])
    assert any("have no result" in p for p in problems)


def test_result_not_adjacent_to_its_call() -> None:
    problems = check_view([USER, CALL, USER, RES_A, RES_B])
    assert problems


def test_duplicate_message_object() -> None:
    assert any("same message object" in p for p in check_view([USER, USER]))


def test_a_reused_call_id_is_reported_even_once_answered() -> None:
    """Providers refuse a request that declares one id twice ("ids must be unique")."""
    again = {**CALL}
    answers = [{**RES_A}, {**RES_B}]
    problems = check_view([USER, CALL, RES_A, RES_B, again, *answers])
    assert any("already declared" in p for p in problems)
    problems = check_view([USER, CALL, RES_A, again, RES_B, *answers])
    assert problems


def test_an_id_repeated_in_one_message_is_named_beside_ids_that_are_no_strings() -> None:
    # An id that is no string is the host model's to refuse; the repeat of a real one is named.
    calls = [{"id": i, "tool": "t", "arguments": {}} for i in ("a", 1, "a", 1)]
    repeating = {"role": "assistant", "content": "", "tool_calls": calls}
    assert check_view([USER, repeating]) == ["view[1]: tool-call id 'a' is declared twice"]


def test_system_after_conversation() -> None:
    assert check_view([USER, {"role": "system", "content": "s"}]) == [
        "view[1]: system message after a non-system message"
    ]


def test_a_display_row_in_a_view_is_named() -> None:
    row = {
        "role": "assistant",
        "content": "Running",
        "metadata": {"amplifier_public_reference_only": True},
    }
    assert check_view([USER, row]) == ["view[1]: carries a public-history metadata key"]


def test_history_checks_first_and_last_human_and_system() -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "last"},
    ]
    assert check_view(history, history=history) == []
    problems = check_view(history[:3], history=history)
    assert any("last human prompt" in p for p in problems)
    problems = check_view(history[1:], history=history)
    assert any("system message" in p for p in problems)


@given(conversations())
def test_generated_complete_conversations_are_valid(case: tuple[list[dict[str, Any]], Any]) -> None:
    messages, _ = case
    assert check_view(messages) == []


# --- each rule against the history, by its exact words ------------------------------------------

FIRST = {"role": "user", "content": "first"}
ANSWER = {"role": "assistant", "content": "ok"}
LAST = {"role": "user", "content": "last"}
RULES = {"role": "system", "content": "rules"}
THOUGHT = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "plan", "signature": "s"},
        {"type": "text", "text": "done"},
    ],
}
FIRST_GONE = "the first human prompt is missing or changed in the view"
LAST_GONE = "the last human prompt is missing or changed in the view"
SYSTEM_GONE = "a system message of the history is missing or changed in the view"
THINKING_GONE = "the latest assistant turn (with thinking) is missing or changed"


def test_the_first_prompt_missing_or_changed_is_named() -> None:
    history: list[dict[str, Any]] = [FIRST, ANSWER, LAST]
    assert check_view(history, history=history) == []
    assert check_view([ANSWER, LAST], history=history) == [FIRST_GONE]
    changed = {"role": "user", "content": "first, edited"}
    assert check_view([changed, ANSWER, LAST], history=history) == [FIRST_GONE]
    # The same words sent as another role are not the prompt.
    assert check_view([{**FIRST, "role": "assistant"}, LAST], history=history) == [FIRST_GONE]


def test_the_last_prompt_is_found_wherever_the_view_has_it() -> None:
    history: list[dict[str, Any]] = [FIRST, ANSWER, LAST, {"role": "assistant", "content": "x"}]
    assert check_view([FIRST, ANSWER, LAST], history=history) == []
    assert check_view([FIRST, ANSWER], history=history) == [LAST_GONE]
    # A later prompt of the view that is not the history's last does not stand for it.
    other = {"role": "user", "content": "another"}
    assert check_view([FIRST, ANSWER, LAST, dict(ANSWER), other], history=history) == []
    assert check_view([FIRST, ANSWER, other], history=history) == [LAST_GONE]


def test_a_system_message_missing_or_changed_is_named_once() -> None:
    history: list[dict[str, Any]] = [RULES, {"role": "system", "content": "more"}, FIRST, ANSWER]
    assert check_view(history, history=history) == []
    assert check_view(history[1:], history=history) == [SYSTEM_GONE]
    assert check_view(history[2:], history=history) == [SYSTEM_GONE]


def test_a_factory_message_stands_for_the_static_system_messages_but_not_a_hooks() -> None:
    factory = {"role": "system", "content": "made", "metadata": {"source": "system-prompt-factory"}}
    hooked = {"role": "system", "content": "injected", "metadata": {"source": "hook"}}
    history: list[dict[str, Any]] = [RULES, hooked, FIRST, ANSWER]
    assert check_view([factory, hooked, FIRST, ANSWER], history=history) == []
    assert check_view([factory, FIRST, ANSWER], history=history) == [SYSTEM_GONE]
    assert check_view([hooked, FIRST, ANSWER], history=history) == [SYSTEM_GONE]


def test_the_latest_assistant_turn_with_thinking_must_go_out_unchanged() -> None:
    history: list[dict[str, Any]] = [FIRST, THOUGHT]
    assert check_view(history, history=history) == []
    assert check_view([FIRST], history=history) == [THINKING_GONE]
    edited = {**THOUGHT, "content": [*THOUGHT["content"][:1], {"type": "text", "text": "other"}]}
    assert check_view([FIRST, edited], history=history) == [THINKING_GONE]
    # Without thinking, the latest answer may be left out.
    plain = [FIRST, ANSWER]
    assert check_view([FIRST], history=plain) == []
    # Only the latest assistant message counts: an earlier thinking answer may go.
    longer: list[dict[str, Any]] = [FIRST, THOUGHT, LAST, ANSWER]
    assert check_view([FIRST, LAST, ANSWER], history=longer) == []


CALL_A = {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "tool": "t"}]}


def _after_a_result(at: int) -> str:
    return (
        f"view[{at}]: a human prompt directly follows a tool result, which it does not in the "
        "history"
    )


AFTER_A = _after_a_result(3)


def test_a_prompt_after_a_result_is_allowed_only_where_the_history_has_it_there() -> None:
    history: list[dict[str, Any]] = [FIRST, CALL_A, RES_A, ANSWER, LAST]
    # The answer between the result and the prompt left out: the prompt merges into the round.
    assert check_view([FIRST, CALL_A, RES_A, LAST], history=history) == [AFTER_A]
    typed_after = [FIRST, CALL_A, RES_A, LAST]
    assert check_view(typed_after, history=typed_after) == []
    # A reminder between them does not hide the result from the prompt.
    reminder = {"role": "user", "content": "<r/>", "metadata": {"source": "hook"}}
    assert check_view([FIRST, CALL_A, RES_A, reminder, LAST], history=history) != []


def test_a_system_message_between_a_result_and_a_prompt_hides_nothing() -> None:
    # System messages are lifted out of the conversation: the prompt still follows the result.
    system = {"role": "system", "content": "s"}
    history: list[dict[str, Any]] = [FIRST, CALL_A, RES_A, ANSWER, LAST]
    problems = check_view([FIRST, CALL_A, RES_A, system, LAST], history=history)
    assert _after_a_result(4) in problems


def test_a_prompt_after_another_prompt_after_a_result_still_follows_the_round() -> None:
    # The provider merges both prompts into the user turn of the result: leaving the first
    # out changes nothing of how the second is read.
    also = {"role": "user", "content": "also this"}
    history: list[dict[str, Any]] = [FIRST, CALL_A, RES_A, LAST, also]
    assert check_view([FIRST, CALL_A, RES_A, also], history=history) == []
    # An answer in between ends the round: then the second prompt does not follow it.
    answered: list[dict[str, Any]] = [FIRST, CALL_A, RES_A, LAST, ANSWER, also]
    assert check_view([FIRST, CALL_A, RES_A, also], history=answered) == [AFTER_A]


def test_a_second_prompt_lands_in_the_round_of_the_result_the_first_follows() -> None:
    # The provider merges both prompts into the result's user turn. In the history an answer
    # came between them, so the second one now reads as part of the tool round.
    also = {"role": "user", "content": "also this"}
    history: list[dict[str, Any]] = [FIRST, CALL_A, RES_A, LAST, ANSWER, also]
    view = [FIRST, CALL_A, RES_A, LAST, also]
    assert check_view(view, history=history) == [_after_a_result(4)]
    assert ViewChecker().check(view, history) == check_view(view, history=history)
    # Where the history has the second prompt right after the first, both follow the result.
    assert check_view(view, history=[FIRST, CALL_A, RES_A, LAST, also]) == []


def _thinking_call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "tool_use", "id": call_id, "name": "read", "input": {}},
        ],
    }


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": "read", "input": {}}],
    }


def _result(call_id: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "r"}],
    }


OPENS_WITHOUT_THINKING = (
    "the active turn does not open with the history's thinking assistant message"
)


@pytest.mark.parametrize(
    "between",
    [
        # Anthropic's shape: the result comes back as a block of a user message, which is the
        # round's result, not a prompt.
        [_result("c0")],
        # The result comes back late, after a plain assistant line: still that round's.
        [{"role": "assistant", "content": "Still reading."}, _result("c0")],
        # A late result, then a prompt: the prompt joins the result's user turn.
        [{"role": "assistant", "content": "Still reading."}, _result("c0"), LAST],
        # A prompt right after a call the user interrupted: it answers nothing, yet the turn
        # the call opened goes on (the view answers the call with a placeholder).
        [LAST],
    ],
    ids=["result block", "late result", "late result and prompt", "interrupted call"],
)
def test_a_prompt_inside_a_tool_round_opens_no_turn(between: list[dict[str, Any]]) -> None:
    history: list[dict[str, Any]] = [
        FIRST,
        _thinking_call("c0"),
        *between,
        _call("c1"),
        _result("c1"),
    ]
    sent = sent_forms(history)
    view = [sent[0], *sent[-2:]]
    problems = check_view(view, history=history)
    assert OPENS_WITHOUT_THINKING in problems, problems
    assert ViewChecker().check(view, history) == problems


def test_a_late_result_in_the_view_keeps_the_round_it_answers_active() -> None:
    # The result comes after a plain assistant line, not right after its call: still a result,
    # so the active turn is the one the call opened, which must keep its thinking.
    still = {"role": "assistant", "content": "Still reading."}
    history: list[dict[str, Any]] = [FIRST, _thinking_call("c0"), still, _result("c0")]
    sent = sent_forms(history)
    stripped = {**sent[1], "content": [b for b in sent[1]["content"] if b["type"] != "thinking"]}
    view = [sent[0], stripped, sent[2], sent[3]]
    # (The view pairs the late result badly too; the turn rule reads it all the same.)
    assert OPENS_WITHOUT_THINKING in check_view(view, history=history)
    assert OPENS_WITHOUT_THINKING not in check_view(sent, history=history)


def test_a_prompt_after_an_unanswered_call_in_the_view_joins_its_round() -> None:
    # The call is unanswered (a pairing problem of its own); the prompt after it still joins
    # the round the thinking call opened, which stays the active turn.
    history: list[dict[str, Any]] = [FIRST, _thinking_call("c0"), LAST, _call("c1"), _result("c1")]
    problems = check_view(sent_forms(history), history=history)
    assert problems and OPENS_WITHOUT_THINKING not in problems


def test_a_prompt_after_a_late_result_follows_that_result() -> None:
    history: list[dict[str, Any]] = [FIRST, CALL_A, ANSWER, _result("a"), LAST]
    sent = sent_forms(history)
    assert check_view([sent[0], sent[1], sent[3], sent[4]], history=history) == []
