"""Describing one view message by message, for ``inspect``: where each message stands in the
history, its size, and what the view did to it (the view-marker keys)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import estimate_message_tokens
from .._messages import (
    ORIGINAL_LENGTH_KEY,
    ORIGINAL_TOKENS_KEY,
    REPAIRED_KEY,
    STUBBED_KEY,
    TRUNCATED_KEY,
    call_ids,
    has_image,
    result_ids,
)
from .._render import text_of
from .drops import PositionIndex, is_notice, tool_names

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
) -> tuple[list[ViewRow], list[int]]:
    """The rows of ``view`` and the history positions it leaves out."""
    positions = PositionIndex()
    positions.sync(history)
    rows: list[ViewRow] = []
    shown: set[int] = set()
    for index, message in enumerate(view):
        position = positions.locate(message)
        if position is not None:
            shown.add(position)
        rows.append(
            ViewRow(
                index=index,
                position=position,
                role=str(message.get("role", "")),
                tokens=estimate_message_tokens(message, family=family),
                chars=len(text_of(message)),
                markers=_markers(message),
                tool_call_ids=list(call_ids(message) or result_ids(message)),
                preview=_preview(message, preview_chars),
            )
        )
    left_out = [i for i in range(len(history)) if i not in shown]
    return rows, left_out


def _markers(message: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    if message.get(TRUNCATED_KEY):
        found.append(f"truncated (was {message.get(ORIGINAL_TOKENS_KEY)} tok)")
    if message.get(STUBBED_KEY):
        found.append(f"stub (was {message.get(ORIGINAL_LENGTH_KEY)} chars)")
    if message.get(REPAIRED_KEY):
        found.append("placeholder")
    if is_notice(message):
        found.append("notice")
    if has_image(message):
        found.append("image")
    return found


def _preview(message: Mapping[str, Any], limit: int) -> str:
    text = " ".join(text_of(message).split())
    if not text:
        names = tool_names(message)
        return f"calls {', '.join(names)}" if names else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
