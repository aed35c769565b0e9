"""Issue 28 §3: every text shape the projection sends as text is capped at ingress alike.

A 360,000-byte tool result given as Responses ``input_text`` / ``output_text`` blocks was
stored and sent whole, with no ``context:tool_result_ingress_truncated``; as a ``text`` block
it was clipped to 131,072 bytes. Both read the one list of those shapes
(``_project.PROJECTED_TEXT_TYPES``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from amplifier_core.hooks import HookRegistry, HookResult

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.history._project import PROJECTED_TEXT_TYPES
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens

DEFAULT_CAP = 131_072
HUGE = 360_000
MARKER = "[tool-result truncated at ingress: original_text_utf8_bytes=360000;"


def _texts(content: Any) -> list[str]:
    out: list[str] = []
    for block in content:
        if block.get("type") == "tool_result":
            out += _texts(block["content"])
        elif isinstance(block.get("text"), str):
            out.append(block["text"])
    return out


async def _admit(result: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    hooks = HookRegistry()
    clips: list[dict[str, Any]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        clips.append(data)
        return HookResult(action="continue")

    hooks.register("context:tool_result_ingress_truncated", record, name="ingress-shapes")
    manager = SimpleContextManager(hooks=hooks)
    await manager.add_message({"role": "user", "content": "read the dump"})
    call = {"id": "dump", "tool": "read_file", "arguments": {"path": "dump.log"}}
    await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
    await manager.add_message(result)
    return manager.messages[-1], clips


@pytest.mark.parametrize("kind", sorted(PROJECTED_TEXT_TYPES))
@pytest.mark.parametrize("shape", ["tool", "tool_result_block"])
def test_every_projected_text_shape_is_clipped_at_ingress(kind: str, shape: str) -> None:
    blocks = [{"type": kind, "text": "x" * HUGE}]
    if shape == "tool":
        result: dict[str, Any] = {"role": "tool", "tool_call_id": "dump", "content": blocks}
    else:
        block = {"type": "tool_result", "tool_use_id": "dump", "content": blocks}
        result = {"role": "user", "content": [block]}
    stored, clips = asyncio.run(_admit(result))
    [text] = _texts(stored["content"])
    assert len(text.encode()) == DEFAULT_CAP
    assert text.count(MARKER) == 1 and text.endswith("output.]")
    [clip] = clips
    assert clip["original_text_utf8_bytes"] == HUGE
    assert clip["stored_text_utf8_bytes"] == DEFAULT_CAP
    assert clip["tool_call_id"] == "dump"


@pytest.mark.parametrize("kind", sorted(PROJECTED_TEXT_TYPES))
def test_each_capped_shape_is_one_the_view_sends_as_text(kind: str) -> None:
    """The list ingress caps is the projection's: each such block goes out as host text."""
    index = HistoryIndex(estimate_message_tokens)
    message = {"role": "tool", "tool_call_id": "c", "content": [{"type": kind, "text": "abc"}]}
    index.sync(
        [{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "tool": "t"}]}, message],
        None,
    )
    sent = index.facts[1].sent
    assert sent["content"] == [{"type": "text", "text": "abc"}]


class TypedText:
    """A typed block (anything with ``model_dump()``) of a Responses text type."""

    def __init__(self, kind: str, text: str) -> None:
        self.type, self.text = kind, text

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@pytest.mark.parametrize("kind", sorted(PROJECTED_TEXT_TYPES))
def test_a_typed_text_block_of_any_projected_type_is_clipped(kind: str) -> None:
    result = {"role": "tool", "tool_call_id": "dump", "content": [TypedText(kind, "x" * HUGE)]}
    stored, clips = asyncio.run(_admit(result))
    [block] = stored["content"]
    assert block["type"] == kind and len(block["text"].encode()) == DEFAULT_CAP
    assert len(clips) == 1


def test_a_timestamp_the_message_brings_is_kept() -> None:
    result = {
        "role": "tool",
        "tool_call_id": "dump",
        "content": "ok",
        "metadata": {"timestamp": "2026-01-02T03:04:05.000Z"},
    }
    stored, _ = asyncio.run(_admit(result))
    assert stored["metadata"]["timestamp"] == "2026-01-02T03:04:05.000Z"
