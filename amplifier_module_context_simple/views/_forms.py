"""The view's shortened forms of one message (truncated, stubbed, a placeholder result) and
what they cost.

A form is built from the message's sent form (``Facts.sent``) and never touches the history's
dict. ``ShortForms`` remembers the estimate of each form by position while the history index's
facts hold (its generation): an escalation weighs the same shortened result
again and again (the rungs, mending, the render after it, the next escalation), and a catch-up
walk makes a hundred escalations in a row.
"""

from __future__ import annotations

__all__ = [
    "PLACEHOLDER_RESULT",
    "STUB_HEAD_CHARS",
    "STUB_TEMPLATE",
    "TRUNCATION_MARKER",
    "ShortForms",
    "can_truncate",
    "placeholder",
    "stubbed",
    "text_of",
    "truncated",
]

from collections.abc import Mapping
from typing import Any

from ..history._history import HistoryIndex
from ..vocabulary._messages import (
    ORIGINAL_LENGTH_KEY,
    ORIGINAL_TOKENS_KEY,
    REPAIRED_KEY,
    RESULT_BLOCK_TYPES,
    STUBBED_KEY,
    TRUNCATED_KEY,
    blocks,
)

TRUNCATION_MARKER = "[truncated: ~{tokens} tokens - call tool again if needed] "
STUB_TEMPLATE = '[User message compacted - original: "{head}..."]'
STUB_HEAD_CHARS = 50
PLACEHOLDER_RESULT = (
    "[no result was recorded for this tool call (the run was interrupted); "
    "call the tool again if its output is needed]"
)

Message = dict[str, Any]


def text_of(message: Mapping[str, Any]) -> str:
    """The readable text of a message: string content or its text-bearing blocks joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in blocks(message):
        text = block.get("text")
        if isinstance(text, str):
            parts.append(text)
            continue
        # Anthropic results carry ``content``, the host's own carry ``output``.
        inner = block.get("content", block.get("output"))
        if isinstance(inner, str):
            parts.append(inner)
        elif isinstance(inner, list):
            parts.extend(
                str(item.get("text", ""))  # type: ignore[union-attr]
                for item in inner  # type: ignore[union-attr]
                if isinstance(item, Mapping)
            )
    return "\n".join(parts)


def can_truncate(message: Mapping[str, Any], keep_chars: int) -> bool:
    """Whether truncating would actually shorten this tool result."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content) > keep_chars + 120
    # Block content (images, nested results) always shrinks to one short text.
    return bool(content)


def truncated(message: Mapping[str, Any], original_tokens: int, keep_chars: int) -> Message:
    """The view's shortened form of a tool result; every other key is kept."""
    marker = TRUNCATION_MARKER.format(tokens=original_tokens)
    result_blocks = [b for b in blocks(message) if b.get("type") in RESULT_BLOCK_TYPES]
    beside: list[Mapping[str, Any]] = []
    if result_blocks and message.get("role") == "user":
        # Text beside the results in a user turn is what a person (or a hook) wrote, not
        # output: it stays, after the results, and only the results are shortened.
        beside = [b for b in blocks(message) if b.get("type") == "text"]
        shown = text_of({"content": result_blocks})
    else:
        shown = text_of(message)
    short = marker + shown[:keep_chars] + "..."
    content: object = short
    if result_blocks:
        # Ids answered by blocks must survive the shortening, or their calls lose a result.
        content = [*(_short_result(b, short) for b in result_blocks), *beside]
        if message.get("role") == "tool" and message.get("tool_call_id"):
            content = [{"type": "text", "text": short}, *content]
    return {
        **message,
        "content": content,
        TRUNCATED_KEY: True,
        ORIGINAL_TOKENS_KEY: original_tokens,
    }


def _short_result(block: Mapping[str, Any], short: str) -> dict[str, Any]:
    """A result block whose payload is ``short``, in whichever field the block carries it."""
    key = "output" if "output" in block or "content" not in block else "content"
    return {**block, key: short}


def stubbed(message: Mapping[str, Any]) -> Message:
    text = text_of(message)
    head = text[:STUB_HEAD_CHARS].replace('"', "'")
    return {
        **message,
        "content": STUB_TEMPLATE.format(head=head),
        STUBBED_KEY: True,
        ORIGINAL_LENGTH_KEY: len(text),
    }


def placeholder(call_id: str) -> Message:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": PLACEHOLDER_RESULT,
        REPAIRED_KEY: True,
    }


class ShortForms:
    """The estimates of the shortened forms of one history's messages, by position.

    A form is a function of the message's sent form and its parameters (the original's tokens
    in the marker, the kept length), and its estimate of the form and the tokenizer family:
    the cache holds while the index's generation does (a rewritten history, or one re-indexed
    for another tokenizer family, bumps it), and starts over when it changes.
    """

    def __init__(self, index: HistoryIndex) -> None:
        self.index = index
        self._generation = index.generation
        self._truncated: dict[int, tuple[int, int, int]] = {}
        """Position -> (original tokens, kept characters, estimate of the truncated form)."""
        self._stubbed: dict[int, int] = {}
        self._placeholders: dict[str, int] = {}

    def _current(self) -> None:
        # A new tokenizer family re-indexes the history, which bumps the generation too.
        generation = self.index.generation
        if generation != self._generation:
            self._generation = generation
            self._truncated, self._stubbed, self._placeholders = {}, {}, {}

    def truncated_tokens(self, position: int, original_tokens: int, keep_chars: int) -> int:
        """The estimate of ``truncated`` for the message at ``position``."""
        self._current()
        known = self._truncated.get(position)
        if known is not None and known[0] == original_tokens and known[1] == keep_chars:
            return known[2]
        form = truncated(self.index.facts[position].sent, original_tokens, keep_chars)
        tokens = self.index.estimate(form)
        self._truncated[position] = (original_tokens, keep_chars, tokens)
        return tokens

    def truncated(
        self, position: int, original_tokens: int, keep_chars: int
    ) -> tuple[Message, int]:
        """The truncated form of the message at ``position`` and its estimate."""
        self._current()
        form = truncated(self.index.facts[position].sent, original_tokens, keep_chars)
        known = self._truncated.get(position)
        if known is not None and known[0] == original_tokens and known[1] == keep_chars:
            return form, known[2]
        tokens = self.index.estimate(form)
        self._truncated[position] = (original_tokens, keep_chars, tokens)
        return form, tokens

    def stubbed_tokens(self, position: int) -> int:
        """The estimate of ``stubbed`` for the message at ``position``."""
        return self.stubbed(position)[1]

    def stubbed(self, position: int) -> tuple[Message, int]:
        """The stub of the message at ``position`` and its estimate."""
        self._current()
        form = stubbed(self.index.facts[position].sent)
        tokens = self._stubbed.get(position)
        if tokens is None:
            tokens = self._stubbed[position] = self.index.estimate(form)
        return form, tokens

    def placeholder(self, call_id: str) -> tuple[Message, int]:
        """The placeholder result for ``call_id`` and its estimate."""
        self._current()
        form = placeholder(call_id)
        tokens = self._placeholders.get(call_id)
        if tokens is None:
            tokens = self._placeholders[call_id] = self.index.estimate(form)
        return form, tokens
