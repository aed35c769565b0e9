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
    metadata,
    result_ids,
)
from .._render import NOTICE_SOURCE, text_of

__all__ = ["ViewRow", "describe_view", "is_notice"]


def is_notice(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and metadata(message).get("source") == NOTICE_SOURCE


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
    by_id = {id(m): i for i, m in enumerate(history)}
    by_meta = {id(m["metadata"]): i for i, m in enumerate(history) if "metadata" in m}
    rows: list[ViewRow] = []
    shown: set[int] = set()
    for index, message in enumerate(view):
        position = by_id.get(id(message))
        if position is None and not (message.get(REPAIRED_KEY) or is_notice(message)):
            # Truncated, stubbed or content-fixed copies share the history's metadata dict.
            position = by_meta.get(id(message.get("metadata")))
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
        names = _tool_names(message)
        return f"calls {', '.join(names)}" if names else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_names(message: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping):
            function = call.get("function")
            name = call.get("tool") or call.get("name")
            if name is None and isinstance(function, Mapping):
                name = function.get("name")
            names.append(str(name))
    return names
