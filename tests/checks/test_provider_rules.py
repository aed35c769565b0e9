"""The provider-rules oracle itself: its conversions, and each rule caught on a small bad view."""

from __future__ import annotations

from typing import Any

import pytest

from ..provider_rules import (
    ERRORS,
    anthropic_violations,
    call_shape_violations,
    host_violations,
    openai_violations,
    provider_violations,
    to_anthropic,
    to_openai_chat,
)

Msg = dict[str, Any]


def user(text: Any = "Do it.") -> Msg:
    return {"role": "user", "content": text}


def think(text: str = "Plan.", sig: str | None = "c2ln") -> Msg:
    block: Msg = {"type": "thinking", "thinking": text}
    if sig is not None:
        block["signature"] = sig
    return block


def call(cid: str, *, thinking: Msg | None = None, text: str | None = None) -> Msg:
    """An assistant round in the shape Amplifier orchestrators store (block + tool_calls)."""
    content: list[Msg] = [thinking] if thinking else []
    if text:
        content.append({"type": "text", "text": text})
    content.append({"type": "tool_call", "id": cid, "name": "bash", "input": {"c": cid}})
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": cid, "tool": "bash", "arguments": {"c": cid}}],
    }


def result(cid: str, text: str = "ok") -> Msg:
    return {"role": "tool", "tool_call_id": cid, "name": "bash", "content": text}


def answer(text: str = "Done.", thinking: Msg | None = None) -> Msg:
    if thinking is None:
        return {"role": "assistant", "content": text}
    return {"role": "assistant", "content": [thinking, {"type": "text", "text": text}]}


def rules(found: list[Any]) -> list[str]:
    return sorted(v.rule for v in found)


GOOD: list[Msg] = [
    {"role": "system", "content": "Be brief."},
    user("First task."),
    call("call_1", thinking=think("a", "s1")),
    result("call_1"),
    call("call_2"),  # interleaved thinking off: only the turn's first round thinks
    result("call_2"),
    answer("First done."),
    user("Second task."),
    {
        "role": "assistant",
        "content": [think("b", "s2"), {"type": "text", "text": "Looking."}],
        "tool_calls": [{"id": "toolu_01-x", "tool": "read", "arguments": {}}],
    },
    result("toolu_01-x", "contents"),
    {"role": "user", "content": "notice", "metadata": {"source": "context-compaction"}},
]


def test_a_good_view_passes_everything() -> None:
    assert provider_violations(GOOD, history=GOOD, thinking=True) == []
    assert host_violations(GOOD) == []
    assert call_shape_violations(GOOD) == []


def test_anthropic_conversion() -> None:
    request = to_anthropic(GOOD)
    assert request.system == ["Be brief."]
    roles = [t["role"] for t in request.messages]
    assert roles == ["user", "assistant"] * 4 + ["user"]
    first_round = request.messages[1]["content"]
    # The stored block and its tool_calls twin go out once.
    assert [b["type"] for b in first_round] == ["thinking", "tool_use"]
    assert first_round[1] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "bash",
        "input": {"c": "call_1"},
    }
    # The answer, then the next human prompt: separate turns; the result + notice: merged.
    assert [b["type"] for b in request.messages[-1]["content"]] == ["tool_result", "text"]
    assert request.origins[-1] == [9, 10]
    # An OpenAI-style call reaches Anthropic with an empty name and no input.
    foreign = {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    wire = to_anthropic([user(), {"role": "assistant", "content": None, "tool_calls": [foreign]}])
    assert wire.messages[1]["content"] == [{"type": "tool_use", "id": "c", "name": "", "input": {}}]
    # Host-shaped and Anthropic-shaped result blocks, and role tool, become tool_result.
    blocks = [
        {"type": "tool_result", "tool_call_id": "a", "output": "x"},
        {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "y"}]},
    ]
    wire = to_anthropic([{"role": "user", "content": blocks}, result("c")])
    assert wire.messages == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "x"},
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": [{"type": "text", "text": "y"}],
                },
                {"type": "tool_result", "tool_use_id": "c", "content": "ok"},
            ],
        }
    ]


def test_openai_conversion() -> None:
    wire = to_openai_chat(GOOD)
    assert wire[0] == {"role": "system", "content": "Be brief."}
    assert wire[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"c": "call_1"}'},
        }
    ]
    assert wire[3] == {"role": "tool", "tool_call_id": "call_1", "content": "ok"}


# --- each rule, caught on its own -----------------------------------------------------------


def test_anthropic_1_call_without_result_after_it() -> None:
    view = [user(), call("c1"), user("Never mind.")]
    assert rules(anthropic_violations(view)) == ["anthropic-1"]
    assert rules(openai_violations(view)) == ["openai-1"]
    (v,) = anthropic_violations(view)
    assert v.error == ERRORS["anthropic-1"] and "without `tool_result`" in str(v)


def test_anthropic_1_open_tail_is_refused_too() -> None:
    assert rules(anthropic_violations([user(), call("c1")])) == ["anthropic-1"]


def test_anthropic_2_result_without_call_before_it() -> None:
    view = [user(), answer("Hm."), result("c9")]
    assert rules(anthropic_violations(view)) == ["anthropic-2"]
    assert rules(openai_violations(view)) == ["openai-1"]
    assert "unexpected `tool_use_id`" in str(anthropic_violations(view)[0])


def test_anthropic_3_text_before_a_tool_result() -> None:
    hook = {"role": "user", "content": "<reminder/>", "metadata": {"source": "hook"}}
    view = [user(), call("c1"), hook, result("c1")]
    assert rules(anthropic_violations(view)) == ["anthropic-3"]
    # Chat completions refuse the same view differently: the results are not adjacent.
    assert rules(openai_violations(view)) == ["openai-1", "openai-1"]
    # Text after the results is fine.
    assert anthropic_violations([user(), call("c1"), result("c1"), hook]) == []


def test_anthropic_4_and_openai_2_duplicate_ids() -> None:
    view = [
        user(),
        call("call_0"),
        result("call_0"),
        answer(),
        user("Again."),
        call("call_0"),
        result("call_0"),
    ]
    assert rules(anthropic_violations(view)) == ["anthropic-4", "anthropic-4"]  # use and result
    assert rules(openai_violations(view)) == ["openai-2"]
    assert "`tool_use` ids must be unique" in str(anthropic_violations(view)[0])
    assert "Duplicate item found with id call_0" in str(openai_violations(view)[0])


def test_anthropic_5_thinking_changed_unsigned_or_reordered() -> None:
    history = [
        user(),
        answer("A", think("one", "s1")),
        user("B"),
        answer("B", think("two", "s2")),
        user("C"),
    ]
    assert anthropic_violations(history, history=history, thinking=True) == []
    changed = [*history[:1], answer("A", think("one!", "s1")), *history[2:]]
    assert rules(anthropic_violations(changed, history=history, thinking=True)) == ["anthropic-5"]
    unsigned = [user(), answer("A", think("one", None)), user("B")]
    assert rules(anthropic_violations(unsigned, thinking=True)) == ["anthropic-5"]
    swapped = [history[0], history[3], history[2], history[1], history[4]]
    found = anthropic_violations(swapped, history=history, thinking=True)
    assert rules(found) == ["anthropic-5"] and "out of order" in str(found[0])
    # A message that keeps only some of its thinking blocks is changed, too.
    two = {
        "role": "assistant",
        "content": [think("x", "a"), think("y", "b"), {"type": "text", "text": "t"}],
    }
    one = {"role": "assistant", "content": [think("x", "a"), {"type": "text", "text": "t"}]}
    assert rules(
        anthropic_violations([user(), one, user("n")], history=[user(), two, user("n")])
    ) == ["anthropic-5"]


def test_anthropic_6_active_turn_must_open_with_thinking() -> None:
    # The case: an old turn's opening (thinking) round and final answer left out, its
    # later round kept; the next prompt merges into that round's results.
    first = call("c1", thinking=think("plan", "s1"))
    later = call("c2", text="Now the tests.")
    history = [
        user("One."),
        first,
        result("c1"),
        later,
        result("c2"),
        answer("Done."),
        user("Two."),
    ]
    history += [call("c3", thinking=think("again", "s3")), result("c3")]
    assert anthropic_violations(history, history=history) == []
    view = [history[0], later, history[4], history[6], history[7], history[8]]
    found = anthropic_violations(view, history=history)
    assert rules(found) == ["anthropic-6"]
    assert "but found `text`" in found[0].error and "final `assistant` message" in found[0].error
    # Only the final assistant turn counts: an earlier turn may open without thinking.
    mixed = [user("One."), answer("No thinking here."), user("Two."), *history[7:]]
    assert anthropic_violations(mixed, thinking=True) == []
    # Off when thinking is off, and auto-detected from the view otherwise.
    assert anthropic_violations(view, thinking=False) == []
    assert rules(anthropic_violations(view)) == ["anthropic-6"]


def test_anthropic_7_empty_text_and_empty_messages() -> None:
    empty_block = [user([{"type": "text", "text": ""}]), answer()]
    blank_block = [user([{"type": "text", "text": " \n"}]), answer()]
    empty_message = [user(""), answer()]
    for view, key in (
        (empty_block, "anthropic-7-empty-text"),
        (blank_block, "anthropic-7-blank-text"),
        (empty_message, "anthropic-7-empty-message"),
    ):
        found = anthropic_violations(view)
        assert rules(found) == ["anthropic-7"], view
        assert found[0].error == ERRORS[key]
    # An empty final assistant message is the one allowed exception.
    assert anthropic_violations([user(), {"role": "assistant", "content": ""}]) == []


def test_anthropic_8_id_alphabet() -> None:
    view = [user(), call("call.1"), result("call.1")]
    assert rules(anthropic_violations(view)) == ["anthropic-8", "anthropic-8"]  # use and result
    assert openai_violations(view) == []


def test_openai_3_call_id_length() -> None:
    long_id = "c" * 41
    view = [user(), call(long_id), result(long_id)]
    assert rules(openai_violations(view)) == ["openai-3"]
    assert "maximum length 40" in str(openai_violations(view)[0])
    assert anthropic_violations(view) == []
    assert openai_violations([user(), call("c" * 40), result("c" * 40)]) == []


def test_host_model_and_call_shape() -> None:
    image_url = user([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}])
    assert rules(host_violations([image_url])) == ["host-message"]
    assert rules(host_violations([{"role": "system", "content": None}, user()])) == ["host-message"]
    assert (
        host_violations([user([{"type": "image", "source": {"type": "base64", "data": "AA"}}])])
        == []
    )
    foreign = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    }
    assert host_violations([user(), foreign]) == []  # validates ...
    assert rules(call_shape_violations([user(), foreign])) == ["host-call-shape"]  # ... but unread


@pytest.mark.parametrize("rule", ["anthropic-1", "anthropic-2", "anthropic-3", "anthropic-4",
                                  "anthropic-5", "anthropic-6", "anthropic-7", "anthropic-8",
                                  "openai-1", "openai-2", "openai-3"])  # fmt: skip
def test_every_rule_quotes_an_error_text(rule: str) -> None:
    assert any(key == rule or key.startswith(rule + "-") for key in ERRORS)
