"""Plain messages: the shapes nearly every history is made of, read in one walk.

Indexing a message reads it several times over: its call and result ids (``_ids``), its
projection (``_project``), its flags (``_messages``: thinking, image, loaded tools, human
prompt). For a resumed history of ten thousand messages that is most of the cost of indexing.
Most messages, though, are plain: a tool result with string content and a string id, a
prompt or an answer with string content, an assistant turn whose blocks are host-valid
``text`` / ``thinking`` / ``tool_call`` dicts with its calls listed once more in
``tool_calls``. The projection sends each of those as it is, and :func:`read_plain` reads
everything the index needs of one in a single pass.

Anything else (or any doubt) reads as ``None`` and takes the general path, which decides every
case; ``tests/history/test_plain.py`` holds the two to the same facts on generated histories.
"""

from __future__ import annotations

__all__ = ["Plain", "read_plain"]

from collections.abc import Mapping
from typing import Any

from ..vocabulary._messages import (
    LOADED_TOOLS_KEY,
    RESULT_ROLES,
    ROLES,
    THINKING_BLOCK_TYPES,
    produced,
)
from ..vocabulary._public import PUBLIC_KEYS
from ._project import TEXT_FIELD_OF

Plain = tuple[str, tuple[str, ...], str | None, bool, bool, bool]
"""What the index reads of a plain message (sent as the very same object): its role, the ids
of its calls as it declares them, the id a tool message answers (else ``None``), and whether
it carries thinking, carries loaded tools, is a human prompt. A bare tuple: one is made for
every message of a resumed history, and a named tuple costs several times more to build."""


def read_plain(message: Mapping[str, Any]) -> Plain | None:
    """``message`` read in one pass, or ``None`` when its shape needs the general path."""
    if type(message) is not dict:
        return None
    role = message.get("role")
    if type(role) is not str or role not in ROLES:
        return None
    meta = message.get("metadata")
    loaded = False
    if meta is not None:
        # Sent as it is only when it is a dict of string keys without public-history keys.
        if type(meta) is not dict or not meta.keys().isdisjoint(PUBLIC_KEYS):
            return None
        for key in meta:  # pyright: ignore[reportUnknownVariableType]
            if type(key) is not str:  # pyright: ignore[reportUnknownArgumentType]
                return None
        loaded = LOADED_TOOLS_KEY in meta
    name = message.get("name")
    if name is not None and type(name) is not str:
        return None
    thinking = bool(message.get("reasoning_content"))
    content = message.get("content")
    call_id = message.get("tool_call_id")
    if role in RESULT_ROLES:
        if type(content) is not str or type(call_id) is not str or not call_id:
            return None
        return role, (), call_id, thinking, loaded, False
    if call_id is not None and type(call_id) is not str:
        return None
    if role != "assistant":
        if type(content) is not str:
            return None
        human = role == "user" and not (meta is not None and produced(meta))  # pyright: ignore[reportUnknownArgumentType]
        return role, (), None, thinking, loaded, human
    listed = _listed_calls(message.get("tool_calls"))
    if listed is None:
        return None
    if type(content) is str:
        return role, listed, None, thinking, loaded, False
    if type(content) is not list:
        return None
    in_blocks: list[str] = []
    for block in content:  # pyright: ignore[reportUnknownVariableType]
        # A block's own ``content`` may nest an image: the general path reads it.
        if type(block) is not dict or "content" in block:
            return None
        kind = block.get("type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if kind == "tool_call":
            block_id = block.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if (
                type(block_id) is not str
                or not block_id
                or type(block.get("name")) is not str  # pyright: ignore[reportUnknownMemberType]
                or type(block.get("input")) is not dict  # pyright: ignore[reportUnknownMemberType]
            ):
                return None
            in_blocks.append(block_id)
            continue
        field = TEXT_FIELD_OF.get(kind) if type(kind) is str else None
        if field is None or type(block.get(field)) is not str:  # pyright: ignore[reportUnknownMemberType]
            return None
        thinking = thinking or kind in THINKING_BLOCK_TYPES
    if in_blocks and listed and tuple(in_blocks) != listed:
        return None  # the same calls, listed twice in the same order: anything else is general
    return role, listed or tuple(in_blocks), None, thinking, loaded, False


def _listed_calls(tool_calls: object) -> tuple[str, ...] | None:
    if tool_calls is None:
        return ()
    if type(tool_calls) is not list:
        return None
    listed: list[str] = []
    for call in tool_calls:  # pyright: ignore[reportUnknownVariableType]
        if type(call) is not dict:
            return None
        call_id = call.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if type(call_id) is not str or not call_id:
            return None
        listed.append(call_id)
    return tuple(listed)
