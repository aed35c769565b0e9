"""The raw ids a message carries and the ids every provider takes (history/_ids.py)."""

from __future__ import annotations

from amplifier_module_context_simple.history._ids import (
    LONG_ID_LIMIT,
    raw_call_ids,
    raw_result_ids,
    well_formed,
)


def test_an_id_every_provider_takes_is_short_and_plain() -> None:
    assert well_formed("call_01-AB")
    assert well_formed("c" * LONG_ID_LIMIT)
    assert not well_formed("c" * (LONG_ID_LIMIT + 1)), "plain but too long"
    assert not well_formed("call 1"), "short but with a space"


def test_a_call_s_raw_id_is_read_under_either_key() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "a", "tool": "t"}, {"tool_call_id": "b", "tool": "t"}],
        "content": [{"type": "tool_use", "id": "c", "name": "t", "input": {}}],
    }
    assert raw_call_ids(message) == (["a", "b"], ["c"])
    assert raw_call_ids({"role": "user", "content": "x"}) == ([], [])


def test_a_result_s_raw_ids_put_its_own_first() -> None:
    assert raw_result_ids({"role": "tool", "tool_use_id": "u", "content": "x"}) == ["u"]
    blocks = [{"type": "tool_result", "tool_use_id": "b", "content": "x"}]
    assert raw_result_ids({"role": "tool", "tool_call_id": "t", "content": blocks}) == ["t", "b"]
    # No usable id of its own: None stands for it only when nothing else names a call.
    assert raw_result_ids({"role": "tool", "tool_call_id": "", "content": "x"}) == [None]
    assert raw_result_ids({"role": "tool", "tool_call_id": 5, "content": "x"}) == [None]
    assert raw_result_ids({"role": "tool", "tool_call_id": 5, "content": blocks}) == ["b"]
    assert raw_result_ids({"role": "user", "content": blocks}) == ["b"]
