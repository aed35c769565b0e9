"""Which call each result answers (vocabulary/_pairing.py): results in every shape, several ids in
one message, ids that answer another call, unknown ids, and answers that come late."""

from __future__ import annotations

from typing import Any

from amplifier_module_context_simple.vocabulary._pairing import pair_messages

Msg = dict[str, Any]


def _calls(*ids: str) -> Msg:
    return {
        "role": "assistant",
        "tool_calls": [{"id": i, "tool": "t", "arguments": {}} for i in ids],
    }


def _tool(call_id: str) -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def _blocks(*ids: str) -> Msg:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids],
    }


def test_one_message_answering_every_id_of_its_call() -> None:
    pairing = pair_messages(
        [{"role": "user", "content": "go"}, _calls("a", "b"), _blocks("a", "b")]
    )
    assert pairing.owner_of == {2: 1}
    assert pairing.results_of == {1: [2]}
    assert pairing.answers == {2: ("a", "b")}
    assert pairing.missing(1) == set() and not pairing.pending_calls
    assert pairing.missing(0) == set(), "a message that makes no call misses nothing"
    assert pairing.orphans == set() and pairing.late_answers == 0


def test_ids_of_another_call_in_the_same_message_are_stray() -> None:
    history = [_calls("a"), _calls("b"), _blocks("b", "a"), _tool("a")]
    pairing = pair_messages(history)
    # The message answers the call of its first waiting id; "a" is not consumed by it.
    assert pairing.owner_of == {2: 1, 3: 0}
    assert pairing.answers == {2: ("b",), 3: ("a",)}
    assert pairing.missing(0) == set() and pairing.missing(1) == set()


def test_a_message_naming_no_waiting_call_is_an_orphan() -> None:
    pairing = pair_messages([_calls("a"), _blocks("x", "y"), _tool("z"), _tool("a")])
    assert pairing.orphans == {1, 2}
    assert pairing.owner_of == {3: 0}


def test_a_call_still_waiting_names_what_it_misses() -> None:
    pairing = pair_messages([_calls("a", "b", "c"), _tool("b")])
    assert pairing.missing(0) == {"a", "c"}
    assert pairing.pending_calls == {0}


def test_answers_after_another_turn_are_counted_late() -> None:
    on_time = pair_messages([_calls("a", "b"), _tool("a"), _tool("b")])
    assert on_time.late_answers == 0
    late = pair_messages(
        [_calls("a", "b"), {"role": "user", "content": "stop"}, _tool("a"), _tool("b")]
    )
    assert late.late_answers == 2
