"""The library says what it does: a misspelt key is named beside the nearest valid one, a
target at or above the threshold and two stored shapes no provider reads as meant are each
logged once."""

from __future__ import annotations

import logging
from dataclasses import fields

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from amplifier_module_context_simple import ContextConfig, SimpleContextManager

from .sizing.test_request_budget import mounted

KEYS = [f.name for f in fields(ContextConfig)]


def _typo(key: str, at: int) -> str:
    """``key`` with one character left out."""
    at %= len(key)
    return key[:at] + key[at + 1 :]


@given(st.sampled_from(KEYS), st.integers(min_value=0))
def test_a_misspelt_keyword_raises_naming_it_and_the_key_it_meant(key: str, at: int) -> None:
    typo = _typo(key, at)
    assume(typo not in KEYS)
    with pytest.raises(TypeError) as error:
        SimpleContextManager(**{typo: 1})
    text = str(error.value)
    assert f"{typo!r} (did you mean {key!r}?)" in text


async def test_a_misspelt_mount_key_is_one_warning_naming_the_nearest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        _, manager, _ = await mounted({"compact_treshold": 0.8, "auto_compact": True})
    said = [r.getMessage() for r in caplog.records if "unknown config key" in r.getMessage()]
    assert len(said) == 1
    assert "'compact_treshold' (did you mean 'compact_threshold'?)" in said[0]
    assert "'auto_compact'" in said[0] and "'auto_compact' (did you mean" not in said[0]
    assert manager.config.compact_threshold == 0.92  # ignored, not fatal


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


@pytest.mark.parametrize(("target", "threshold"), [(0.92, 0.92), (0.95, 0.9), (0.5, 0.5)])
def test_a_target_at_or_above_the_threshold_is_logged_once_and_kept(
    target: float, threshold: float, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        manager = SimpleContextManager(target_usage=target, compact_threshold=threshold)
    assert len(_said(caplog, "is not below compact_threshold")) == 1
    assert manager.config.target_usage == target


def test_a_target_below_the_threshold_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        SimpleContextManager(target_usage=0.5, compact_threshold=0.51)
    assert _said(caplog, "compact_threshold") == []


OPENAI = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
PUBLISHED = {"id": "c3", "tool": "read", "name": "read", "arguments": {}}


def _session(calls: list[dict[str, object]]) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [{"role": "user", "content": "go"}]
    for call in calls:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
    return messages


async def test_openai_shaped_calls_are_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    manager = SimpleContextManager()
    with caplog.at_level(logging.WARNING):
        for message in _session([PUBLISHED, OPENAI, {**OPENAI, "id": "c2"}]):
            await manager.add_message(message)
    assert _said(caplog, "OpenAI's shape") == [
        "context-simple: message 3 stores a tool call in OpenAI's shape "
        '({"type": "function", "function": {...}}); Amplifier\'s providers read '
        '{"id", "tool", "arguments": {...}} and send it without a name or arguments: store '
        "calls in that shape (said once)"
    ]
    caplog.clear()
    resumed = SimpleContextManager()
    with caplog.at_level(logging.WARNING):
        await resumed.set_messages(_session([OPENAI, {**OPENAI, "id": "c2"}]))
    assert len(_said(caplog, "OpenAI's shape")) == 1


async def test_only_a_call_named_inside_function_alone_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A call that carries its tool beside ``function``, or no name anywhere, is not OpenAI's
    # shape: the providers read its tool, or there is no name to lose.
    beside = {"id": "c5", "tool": "read", "function": {"name": "read", "arguments": "{}"}}
    named = {"id": "c7", "name": "read", "function": {"name": "read", "arguments": "{}"}}
    nameless = {"id": "c6", "arguments": {}}
    with caplog.at_level(logging.WARNING):
        await SimpleContextManager().set_messages(_session([beside, named, nameless]))
    assert _said(caplog, "OpenAI's shape") == []


async def test_published_calls_are_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    manager = SimpleContextManager()
    with caplog.at_level(logging.WARNING):
        await manager.set_messages(_session([PUBLISHED, {**PUBLISHED, "id": "c4"}]))
    assert caplog.records == []


async def test_a_result_without_an_id_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = SimpleContextManager()
    with caplog.at_level(logging.WARNING):
        await manager.add_message({"role": "user", "content": "go"})
        await manager.add_message({"role": "tool", "content": "lost"})
        await manager.add_message({"role": "tool", "content": "lost again"})
    assert _said(caplog, "without a tool_call_id") == [
        "context-simple: message 1 is a 'tool' message without a tool_call_id: it answers no "
        "call, so every view leaves it out (said once)"
    ]
    view = await manager.get_messages_for_request()
    assert all(m.get("role") != "tool" for m in view)  # what the warning says happens


@pytest.mark.parametrize("stored_id", ["", None], ids=["empty", "null"])
async def test_a_resumed_result_whose_id_is_empty_is_warned_about(
    caplog: pytest.LogCaptureFixture, stored_id: str | None
) -> None:
    history = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "", "content": "lost"},
        {"role": "tool", "tool_call_id": stored_id, "content": "lost again"},
    ]
    with caplog.at_level(logging.WARNING):
        await SimpleContextManager().set_messages(history)
    said = _said(caplog, "without a tool_call_id")
    assert len(said) == 1 and "message 1" in said[0]
