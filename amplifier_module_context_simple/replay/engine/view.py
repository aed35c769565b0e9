"""Describing one view message by message, for ``inspect``: where each message stands in the
history, its size, and what the view did to it (the view-marker keys)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import estimate_message_tokens
from ...views._render import text_of
from ...vocabulary._messages import (
    ORIGINAL_LENGTH_KEY,
    ORIGINAL_TOKENS_KEY,
    REPAIRED_KEY,
    STUBBED_KEY,
    TRUNCATED_KEY,
    call_ids,
    has_image,
    result_ids,
)
from ..findings.drops import PositionIndex, is_notice, tool_names

__all__ = ["ViewRow", "describe_view", "is_notice"]


@dataclass
class ViewRow:
    """One message of a view, as ``inspect`` shows it."""

    index: int
    position: int | None
    """Its position in the history (None for the notice and placeholder results)."""
    role: str
    tokens: int
    chars: int
    markers: list[str]
    tool_call_ids: list[str]
    preview: str


def describe_view(
    view: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    *,
    family: str | None,
    preview_chars: int = 60,
    start: int = 0,
) -> tuple[list[ViewRow], list[int]]:
    """The rows of ``view`` and the history positions it leaves out. ``start``: where the
    history the view was cut from begins in ``history`` (after the agent's own compaction, its
    summary); what comes before is no view's to hold, so it is never counted as left out."""
    positions = PositionIndex()
    positions.sync(history[start:])
    rows: list[ViewRow] = []
    shown: set[int] = set()
    for index, message in enumerate(view):
        position = positions.locate(message)
        if position is not None:
            position += start
            shown.add(position)
        rows.append(
            ViewRow(
                index=index,
                position=position,
                role=str(message.get("role", "")),
                tokens=estimate_message_tokens(message, family=family),
                chars=len(text_of(message)) + call_chars(message),
                markers=_markers(message),
                tool_call_ids=list(call_ids(message) or result_ids(message)),
                preview=_preview(message, preview_chars),
            )
        )
    left_out = [i for i in range(start, len(history)) if i not in shown]
    return rows, left_out


def call_chars(message: Mapping[str, Any]) -> int:
    """Characters of a message's tool-call arguments (as JSON; a string as it is): a call's
    content is its arguments, e.g. the file a ``write_file`` call writes."""
    calls: Any = message.get("tool_calls")
    found: list[Any] = (
        [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []
    )
    content: Any = message.get("content")
    if isinstance(content, list):
        found += [
            b for b in content
            if isinstance(b, Mapping) and b.get("type") in {"tool_use", "tool_call"}
        ]  # fmt: skip
    total = 0
    for call in found:
        if not isinstance(call, Mapping):
            continue
        args: Any = call.get("arguments", call.get("input"))
        if isinstance(args, str):
            total += len(args)
        elif args is not None:
            total += len(json.dumps(args, ensure_ascii=False, default=str))
    return total


def _markers(message: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    if message.get(TRUNCATED_KEY):
        found.append(f"truncated (was {_count(message.get(ORIGINAL_TOKENS_KEY))} tok)")
    if message.get(STUBBED_KEY):
        found.append(f"stub (was {_count(message.get(ORIGINAL_LENGTH_KEY))} chars)")
    if message.get(REPAIRED_KEY):
        found.append("placeholder")
    if is_notice(message):
        found.append("notice")
    if has_image(message):
        found.append("image")
    return found


def _count(value: object) -> str:
    """A marker's figure as every other figure is shown: with thousands separators."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _preview(message: Mapping[str, Any], limit: int) -> str:
    text = " ".join(text_of(message).split())
    if not text:
        names = tool_names(message)
        return f"calls {', '.join(names)}" if names else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
