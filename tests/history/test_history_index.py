"""The history index's generation: the one figure every cache of a rendered or weighed view is
keyed on (the view cache, the planner's, the notice slots, the shortened forms).

A cache holds what it computed for a generation and trusts it while the figure reads the same,
so the figure must never come back to a value it had: a late answer, a rewrite and a change of
tokenizer family each give one never seen before.
"""

from __future__ import annotations

import copy
from typing import Any

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.sizing._estimate import FAMILIES


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    }


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "a.txt"}


def test_the_generation_never_comes_back_to_a_value_it_had() -> None:
    index = HistoryIndex(estimate_message_tokens, json_cap=4096)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "list the files"},
        _call("c1"),
        {"role": "user", "content": "never mind"},
    ]
    seen = [index.generation]
    index.sync(history, None)
    history.append(_result("c1"))  # answers a call other turns already followed
    index.sync(history, None)
    assert index.generation != seen[-1], "a late answer changes what the views show"
    seen.append(index.generation)
    history += [_call("c2"), {"role": "user", "content": "and now?"}, _result("c2")]
    index.sync(history, None)  # and so does every later one
    seen.append(index.generation)
    rewritten = [{"role": "user", "content": "start over"}, *history[1:]]
    index.sync(rewritten, None)  # a rewrite re-indexes from the start
    seen.append(index.generation)
    index.sync(rewritten, FAMILIES[0])  # so does another tokenizer family
    seen.append(index.generation)
    index.reset()
    seen.append(index.generation)
    assert len(set(seen)) == len(seen), f"a generation came back: {seen}"
    assert index.facts == []


async def test_a_message_replaced_in_place_as_the_history_grows_is_sent_as_it_now_is() -> None:
    manager = SimpleContextManager()
    for text in ("first question", "first answer", "second question"):
        role = "assistant" if "answer" in text else "user"
        await manager.add_message({"role": role, "content": text})
    await manager.get_messages_for_request()
    manager.messages[1] = {"role": "assistant", "content": "a corrected answer"}
    manager.messages.append({"role": "assistant", "content": "second answer"})
    manager.messages.append({"role": "user", "content": "third question"})
    view = await manager.get_messages_for_request()
    assert [m["content"] for m in view] == [
        "first question",
        "a corrected answer",
        "second question",
        "second answer",
        "third question",
    ]


async def test_an_equal_copy_of_a_repaired_message_is_still_sent_repaired() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Go."})
    manager.messages.append({"role": "assistant", "content": ["Reading.", 7]})
    repaired = [{"type": "text", "text": "Reading."}, {"type": "text", "text": "7"}]
    assert (await manager.get_messages_for_request())[1]["content"] == repaired
    manager.messages[1] = copy.deepcopy(manager.messages[1])
    assert (await manager.get_messages_for_request())[1]["content"] == repaired
    manager.messages = copy.deepcopy(manager.messages)
    assert (await manager.get_messages_for_request())[1]["content"] == repaired
    # A late answer makes every view be rendered afresh from what the index holds.
    manager.messages += [_call("c1"), {"role": "user", "content": "still there?"}, _result("c1")]
    assert (await manager.get_messages_for_request())[1]["content"] == repaired


def test_a_late_result_after_an_answer_does_not_open_the_active_turn() -> None:
    # The provider merges a tool result into a user turn that carries it: such a turn is no
    # prompt, so the active turn still opens at the last prompt typed.
    index = HistoryIndex(estimate_message_tokens, json_cap=4096)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "list the files"},
        _call("c1"),
        {"role": "user", "content": "never mind"},
        {"role": "assistant", "content": "Stopped."},
        _result("c1"),
        {"role": "assistant", "content": "It finished after all: a.txt."},
    ]
    index.sync(history, None)
    active = index.turns.active()
    assert (active.anchor, active.follows, active.opener) == ((0,), None, 1)
