"""check_view: each rule fires on a view that breaks it, and stays quiet on valid views."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from amplifier_module_context_simple import check_view

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


def test_system_after_conversation() -> None:
    assert check_view([USER, {"role": "system", "content": "s"}])


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
