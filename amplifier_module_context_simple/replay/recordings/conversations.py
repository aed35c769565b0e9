"""Reading JSONL that holds one whole conversation per line: ``{"messages": [...]}``.

That is the layout of OpenAI fine-tuning files and of many evaluation and batch sets (other
keys beside ``messages``, such as ``tools`` or ``parallel_tool_calls``, are left alone). One
conversation is replayed: the only one, or the one ``--conversation N`` names (1-based, the
line's place among the conversations). Its messages go through the same checks and
normalisation as a line-per-message transcript (:func:`.transcripts.collect_messages`), numbered
by their place in the conversation. The file is streamed: only the chosen line is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .transcripts import LoadedTranscript, TranscriptError, as_message, collect_messages

__all__ = [
    "CONVERSATION_FLAG",
    "Conversation",
    "is_conversation_file",
    "is_conversation_path",
    "load_conversation",
]

CONVERSATION_FLAG = "--conversation"
MESSAGES_KEY = "messages"
_SNIFF_LINES = 20


@dataclass(frozen=True)
class Conversation:
    """The conversation chosen, its place and how many the file holds."""

    loaded: LoadedTranscript
    number: int
    count: int


def _value(line: bytes | str) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _is_conversation(value: object) -> bool:
    return (
        isinstance(value, dict)
        and "role" not in value
        and isinstance(value.get(MESSAGES_KEY), list)
    )


def is_conversation_file(lines: Iterable[bytes | str]) -> bool:
    """Whether the first JSON line (of the first few that are not blank) is a conversation:
    an object with a ``messages`` array and no ``role``."""
    for seen, line in enumerate(lines):
        if seen >= _SNIFF_LINES:
            return False
        if line.strip():
            return _is_conversation(_value(line))
    return False


def is_conversation_path(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with path.open("rb") as stream:
            return is_conversation_file(stream)
    except OSError:
        return False


def load_conversation(
    lines: Iterable[bytes | str], *, label: str, choice: int | None, strict: bool
) -> Conversation:
    """The chosen conversation of ``lines``; :class:`TranscriptError` when there are several and
    none was chosen, when the choice is past the end, or (``strict``) for a line or message that
    cannot be used."""
    if choice is not None and choice < 1:
        raise TranscriptError(f"{CONVERSATION_FLAG} must be 1 or more; got {choice}")
    count, chosen = 0, None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value = _value(line)
        if not _is_conversation(value):
            if strict:
                raise TranscriptError(f"{label}: line {number}: not a conversation object with "
                                      f"a {MESSAGES_KEY!r} array")  # fmt: skip
            continue
        count += 1
        if count == (choice or 1):
            chosen = (count, value)
    if choice is None and count > 1:
        raise TranscriptError(
            f"{label} holds {count:,} conversations (one per line): choose one with "
            f"{CONVERSATION_FLAG} N (1-{count:,})"
        )
    if chosen is None:
        raise TranscriptError(
            f"{CONVERSATION_FLAG} {choice} is past the end: {label} holds {count:,} conversation(s)"
        )
    number, value = chosen
    assert isinstance(value, dict)
    messages: list[Any] = value[MESSAGES_KEY]
    loaded = collect_messages(
        _messages(messages), label=f"{label}, conversation {number}", strict=strict,
        unit="message",
    )  # fmt: skip
    return Conversation(loaded, number, count)


def _messages(messages: list[Any]) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    for number, value in enumerate(messages, 1):
        yield number, *as_message(value)
