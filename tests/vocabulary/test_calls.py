"""What an assistant message's calls say (vocabulary/_calls.py): id, tool and arguments in every
shape a call is stored in, each call once."""

from __future__ import annotations

from typing import Any

from amplifier_core.message_models import ToolCallBlock

from amplifier_module_context_simple.vocabulary._calls import calls_made


def test_amplifier_s_call_stored_twice_is_one_call() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "a", "tool": "bash", "arguments": {"cmd": "ls"}}],
        "content": [{"type": "tool_call", "id": "a", "name": "bash", "input": {"cmd": "ls"}}],
    }
    assert calls_made(message) == [("a", "bash", {"cmd": "ls"})]


def test_openai_s_function_shape_gives_its_name_and_arguments() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "b", "type": "function", "function": {"name": "grep", "arguments": '{"q": 1}'}}
        ],
    }
    assert calls_made(message) == [("b", "grep", '{"q": 1}')]


def test_the_call_s_own_name_and_arguments_win_over_its_function_s() -> None:
    call = {
        "id": "c",
        "name": "own",
        "arguments": {"x": 1},
        "function": {"name": "f", "arguments": "{}"},
    }
    assert calls_made({"role": "assistant", "tool_calls": [call]}) == [("c", "own", {"x": 1})]
    legacy = {"tool_call_id": "d", "tool": "read"}
    assert calls_made({"role": "assistant", "tool_calls": [legacy]}) == [("d", "read", None)]


def test_blocks_are_read_in_every_shape_and_unlisted_ones_are_kept() -> None:
    message: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [{"id": "a", "tool": "bash", "arguments": {}}],
        "content": [
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "e", "name": "edit", "input": {"path": "p"}},
            {"type": "tool_call", "id": "f", "name": "run", "arguments": {"n": 2}},
            ToolCallBlock(id="g", name="look", input={"at": "q"}),
            {"type": "tool_use", "name": "anonymous", "input": {}},
        ],
    }
    assert calls_made(message) == [
        ("a", "bash", {}),
        ("e", "edit", {"path": "p"}),
        ("f", "run", {"n": 2}),
        ("g", "look", {"at": "q"}),
        ("", "anonymous", {}),
    ]


def test_what_is_no_call_is_passed_over() -> None:
    assert calls_made({"role": "assistant", "tool_calls": "not a list"}) == []
    assert calls_made({"role": "assistant", "tool_calls": ["not a call", None]}) == []
    assert calls_made({"role": "assistant", "content": "text only"}) == []
    assert calls_made({"role": "assistant", "tool_calls": [{"function": "not a mapping"}]}) == [
        ("", "None", None)
    ]
