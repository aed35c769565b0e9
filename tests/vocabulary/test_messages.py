"""The message vocabulary: ids in every shape, grouping, human classification, validation."""

from __future__ import annotations

from typing import Any

import pytest
from amplifier_core.message_models import TextBlock, ToolCallBlock
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.vocabulary._messages import (
    LOADED_TOOLS_KEY,
    call_ids,
    carries_loaded_tools,
    has_image,
    has_thinking,
    is_human_prompt,
    is_tool_result,
    result_ids,
    thinking_blocks,
    validate_message,
)
from amplifier_module_context_simple.vocabulary._pairing import pair_messages


def test_call_ids_in_every_shape() -> None:
    amplifier = {"role": "assistant", "tool_calls": [{"id": "a", "tool": "t", "arguments": {}}]}
    openai = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    legacy = {"role": "assistant", "tool_calls": [{"tool_call_id": "c", "tool": "t"}]}
    blocks = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "tool_use", "id": "d", "name": "n", "input": {}},
            ToolCallBlock(id="e", name="n", input={}),
        ],
    }
    assert call_ids(amplifier) == ("a",)
    assert call_ids(openai) == ("b",)
    assert call_ids(legacy) == ("c",)
    assert call_ids(blocks) == ("d", "e")
    assert has_thinking(blocks)
    both = {**amplifier, "content": [{"type": "tool_call", "id": "a", "name": "t", "input": {}}]}
    assert call_ids(both) == ("a",), "the same id in tool_calls and blocks counts once"


def test_result_ids_in_every_shape() -> None:
    assert result_ids({"role": "tool", "tool_call_id": "a", "content": "x"}) == ("a",)
    anthropic = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "b", "content": "ok"}],
    }
    assert result_ids(anthropic) == ("b",)
    assert not is_human_prompt(anthropic)
    # A tool message that names its call Anthropic's way is read too.
    assert result_ids({"role": "tool", "tool_use_id": "c", "content": "x"}) == ("c",)


def test_a_tool_message_is_a_result_even_before_its_id_is_known() -> None:
    assert is_tool_result({"role": "tool", "content": "x"})
    assert is_tool_result(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b"}]}
    )
    assert not is_tool_result({"role": "user", "content": "x"})


@pytest.mark.parametrize(
    ("message", "human"),
    [
        ({"role": "user", "content": "fix the bug"}, True),
        ({"role": "user", "content": [TextBlock(text="typed block")]}, True),
        ({"role": "user", "content": "x", "metadata": {"source": "hook"}}, False),
        ({"role": "user", "content": "x", "metadata": {"ephemeral": True}}, False),
        ({"role": "user", "content": "x", "metadata": {"source": "context-compaction"}}, False),
        ({"role": "assistant", "content": "x"}, False),
        ({"role": "system", "content": "x"}, False),
        # Quoting reminder markup does not make a typed prompt anything else.
        ({"role": "user", "content": "<system-reminder>hi</system-reminder>"}, True),
        # A source that names no known producer (even an unhashable one) is a person's.
        ({"role": "user", "content": "x", "metadata": {"source": ["hook"]}}, True),
        ({"role": "user", "content": "x", "metadata": {"source": {"by": "hook"}}}, True),
    ],
)
def test_human_prompts_are_classified_by_metadata(message: dict[str, Any], human: bool) -> None:
    assert is_human_prompt(message) is human


async def test_a_prompt_with_an_unhashable_source_is_admitted_and_sent() -> None:
    manager = SimpleContextManager()
    prompt = {"role": "user", "content": "go", "metadata": {"source": ["a", "list"]}}
    await manager.add_message(dict(prompt))
    resumed = SimpleContextManager()
    await resumed.set_messages([dict(prompt)])
    for view in (
        await manager.get_messages_for_request(),
        await resumed.get_messages_for_request(),
    ):
        assert [m["content"] for m in view] == ["go"]


@pytest.mark.parametrize(
    ("message", "error", "fragment"),
    [
        ("hello", TypeError, "must be a dict"),
        ({}, ValueError, "'role' key is missing"),
        ({"role": "robot", "content": "x"}, ValueError, "'role' must be one of"),
        ({"role": "user", "content": 5}, ValueError, "'content'"),
        ({"role": "user", "content": {"text": "x"}}, ValueError, "'content'"),
        ({"role": "assistant", "tool_calls": "call()"}, ValueError, "'tool_calls'"),
        ({"role": "assistant", "tool_calls": ["x"]}, ValueError, "tool_calls[0]"),
        ({"role": "user", "content": "x", "metadata": []}, ValueError, "'metadata'"),
        ({"role": "tool", "tool_call_id": 7, "content": "x"}, ValueError, "'tool_call_id'"),
    ],
)
def test_broken_messages_are_named(message: object, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as raised:
        validate_message(message, 3)
    assert fragment in str(raised.value)
    assert "message #3" in str(raised.value)


# --- generated conversations --------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """Conversations with parallel calls; returns messages and the expected groups."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    groups: list[list[int]] = []
    turns = draw(st.integers(0, 8))
    counter = 0
    for _ in range(turns):
        width = draw(st.integers(0, 4))
        ids = [f"c{counter + i}" for i in range(width)]
        counter += width
        block_form = draw(st.booleans())
        if block_form:
            call = {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": i, "name": "t", "input": {}} for i in ids]
                or "plain",
            }
        else:
            call = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": i, "tool": "t", "arguments": {}} for i in ids] or None,
            }
        messages.append(call)
        if ids:
            group = [len(messages) - 1]
            order = draw(st.permutations(ids))
            for call_id in order:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": "r"})
                group.append(len(messages) - 1)
            groups.append(group)
        if draw(st.booleans()):
            messages.append({"role": "user", "content": "more"})
    return messages, groups


@given(conversations())
def test_pairing_finds_exactly_the_groups(
    case: tuple[list[dict[str, Any]], list[list[int]]],
) -> None:
    messages, groups = case
    pairing = pair_messages(messages)
    found = [[call, *results] for call, results in sorted(pairing.results_of.items()) if results]
    assert found == groups
    assert pairing.pending_calls == set()
    assert pairing.orphans == set()


@given(conversations(), st.data())
def test_dropping_a_result_is_seen_as_missing(
    case: tuple[list[dict[str, Any]], list[list[int]]], data: st.DataObject
) -> None:
    messages, groups = case
    if not groups:
        return
    group = data.draw(st.sampled_from(groups))
    victim = data.draw(st.sampled_from(group[1:]))
    dropped_id = messages[victim]["tool_call_id"]
    remaining = messages[:victim] + messages[victim + 1 :]
    pairing = pair_messages(remaining)
    assert pairing.missing(group[0]) == {dropped_id}
    assert pairing.pending_calls == {group[0]}


def test_orphans_and_reused_ids() -> None:
    messages = [
        {"role": "tool", "tool_call_id": "ghost", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "a", "tool": "t"}]},
        {"role": "assistant", "tool_calls": [{"id": "a", "tool": "t"}]},
        {"role": "tool", "tool_call_id": "a", "content": "y"},
        {"role": "tool", "tool_call_id": "a", "content": "again"},
    ]
    pairing = pair_messages(messages)
    assert pairing.orphans == {0, 4}
    assert pairing.owner_of == {3: 2}, "a result goes to the newest call waiting for its id"
    assert pairing.missing(1) == {"a"}


@pytest.mark.parametrize(
    ("message", "index", "expected"),
    [
        (["not", "a", "dict"], None, "message (list): a message must be a dict, got list"),
        (42, 3, "message #3 (int): a message must be a dict, got int"),
        (
            {"role": "robot"},
            None,
            "message (role='robot'): 'role' must be one of assistant, developer, function, "
            "system, tool, user",
        ),
        (
            {"role": "assistant", "tool_calls": "ls"},
            1,
            "message #1 (role='assistant'): 'tool_calls' must be a list, got str",
        ),
        (
            {"role": "user", "metadata": ["x"]},
            2,
            "message #2 (role='user'): 'metadata' must be a dict, got list",
        ),
        (
            {"role": "user", "metadata": {7: "x"}},
            2,
            "message #2 (role='user'): 'metadata' keys must be strings, got int 7",
        ),
        (
            {"role": "user", "name": 5},
            0,
            "message #0 (role='user'): 'name' must be a string, got int",
        ),
    ],
)
def test_a_refused_message_is_described_word_for_word(
    message: Any, index: int | None, expected: str
) -> None:
    with pytest.raises((TypeError, ValueError)) as refused:
        validate_message(message, index)
    assert str(refused.value) == expected


def test_content_blocks_that_are_plain_dicts_are_not_read_on_admission() -> None:
    # Blocks are stored as they came; only a typed block is dumped (and its failure named).
    class Dumps:
        def model_dump(self) -> dict[str, Any]:
            raise RuntimeError("cannot dump")

    validate_message({"role": "user", "content": [{"type": "mystery", "x": object()}]})
    with pytest.raises(ValueError) as refused:
        validate_message({"role": "user", "content": [{"type": "text", "text": "a"}, Dumps()]})
    assert str(refused.value) == (
        "message (role='user'): content block 1: model_dump() of a typed content block "
        "failed: RuntimeError: cannot dump"
    )


def test_thinking_images_and_loaded_tools_are_found_in_every_shape() -> None:
    signed = {"type": "thinking", "thinking": "a", "signature": "s"}
    both = {"role": "assistant", "reasoning_content": "hm", "content": [signed, signed]}
    assert has_thinking({"role": "assistant", "reasoning_content": "hm", "content": "x"})
    assert not has_thinking({"role": "assistant", "content": "x"})
    assert thinking_blocks(both) == 3, "reasoning_content counts as one block"
    assert thinking_blocks({"role": "assistant", "content": [signed]}) == 1
    assert thinking_blocks({"role": "assistant", "content": "x"}) == 0
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    result = {"type": "tool_result", "tool_use_id": "a"}
    assert has_image({"role": "user", "content": [{"type": "text", "text": "see"}, image]})
    assert has_image({"role": "user", "content": [url]})
    assert has_image({"role": "user", "content": [{**result, "content": ["text", image]}]})
    assert not has_image({"role": "user", "content": [{**result, "content": "text"}]})
    assert not has_image({"role": "user", "content": [{"type": "text", "text": "image"}]})
    assert carries_loaded_tools(
        {"role": "user", "content": "x", "metadata": {LOADED_TOOLS_KEY: []}}
    )
    assert not carries_loaded_tools({"role": "user", "content": "x"})
