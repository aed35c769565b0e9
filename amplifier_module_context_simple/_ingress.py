"""Ingress cap for tool-result text.

A tool message is checked once, before it is admitted to the history. If its text is
larger than the configured number of UTF-8 bytes, the stored copy keeps a prefix that
ends on a character boundary, followed by one bracketed marker that tells the model how
large the original was and how to get the rest. The dropped text is not kept anywhere.

What counts as "text":

* string content: the string itself;
* a list of content blocks: only the ``text`` of direct ``{"type": "text", "text": str}``
  dicts and of the host's typed ``TextBlock`` objects (anything with ``model_dump()``,
  ``type == "text"`` and a string ``text``; a clipped one is stored as a dict). Their bytes
  share one budget in list order. Image, audio, unknown, nested and other typed blocks are
  neither measured nor touched;
* any other JSON-shaped content (a dict such as a serialised ``ToolResult``, or a list that
  is not a block list): measured as its ``json.dumps`` text, and only replaced by that
  (clipped) text when it is over the cap.

Byte counts treat a lone surrogate as the one byte Python's ``"replace"`` encode error
handler writes for it (``?``). Content under the cap is returned as the very same object,
surrogates and all; a clipped prefix has those surrogates replaced by ``?`` so the stored
text is always valid UTF-8.

The marker comes straight after the prefix with no separator: it is self-delimiting
(square brackets), and leaving the separator out keeps the stored size exactly at the cap
for ASCII text and keeps ``MIN_TOOL_RESULT_BYTES`` a true lower bound (see below).

This module only uses the standard library and never mutates its input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Literal

from ._messages import validate_message
from ._numbers import is_int

__all__ = [
    "INGRESS_MARKER_TEMPLATE",
    "MIN_TOOL_RESULT_BYTES",
    "IngressClip",
    "admit",
    "clip_tool_result",
    "ingress_marker",
    "utf8_byte_length",
]

INGRESS_MARKER_TEMPLATE = (
    "[tool-result truncated at ingress: original_text_utf8_bytes={original_text_utf8_bytes}; "
    "retrieve missing content using narrower read/query parameters; "
    "do not repeat state-changing actions just to recover output.]"
)

# The marker is 186 ASCII bytes plus the decimal digits of N. 205 leaves room for 19
# digits, i.e. every N below 10**19 bytes. A Python string cannot get anywhere near that
# (sys.maxsize is itself 19 digits), so at any cap >= 205 the marker alone always fits.
MIN_TOOL_RESULT_BYTES = 205

ContentKind = Literal["string", "blocks"]

# Python's "replace" error handler writes one b"?" per unencodable code point (a lone
# surrogate), which is what makes byte accounting well defined for ill-formed text.
_ENCODE_ERRORS = "replace"


def utf8_byte_length(text: str) -> int:
    """Return the UTF-8 size of ``text``, counting a lone surrogate as one byte."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", _ENCODE_ERRORS))


def ingress_marker(original_text_utf8_bytes: int) -> str:
    """Return the marker for an original text of the given UTF-8 size."""
    return INGRESS_MARKER_TEMPLATE.format(original_text_utf8_bytes=original_text_utf8_bytes)


@dataclass(frozen=True)
class IngressClip:
    """What a clip did, in sizes only; never carries any of the content."""

    tool_name: str | None
    tool_call_id: str | None
    original_text_utf8_bytes: int
    stored_text_utf8_bytes: int
    max_tool_result_bytes: int
    content_kind: ContentKind

    def payload(self) -> dict[str, Any]:
        """Return the JSON-safe event payload describing this clip: every field, in order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def clip_tool_result(
    message: dict[str, Any], max_bytes: int
) -> tuple[dict[str, Any], IngressClip | None]:
    """Apply the ingress cap to one message.

    Returns ``(message, None)`` - the same object - for anything that is not a ``tool``
    message or whose text fits. Otherwise returns a new message dict (other keys shared
    with the input) with clipped content, plus an :class:`IngressClip` describing it.
    Raises ``ValueError`` for a cap too small to hold the marker.
    """
    _check_cap(max_bytes)
    if message.get("role") != "tool":
        return message, None

    content = message.get("content")
    kind: ContentKind
    if isinstance(content, str):
        result = _clip_string(content, max_bytes)
        kind = "string"
    elif isinstance(content, list) and _is_block_list(content):
        result = _clip_blocks(content, max_bytes)
        kind = "blocks"
    elif isinstance(content, (dict, list)):
        result = _clip_json(content, max_bytes)
        kind = "string"
    else:
        # None, numbers and other scalars carry no text worth capping.
        return message, None

    if result is None:
        return message, None
    new_content, original, stored = result
    clipped = {**message, "content": new_content}
    clip = IngressClip(
        tool_name=_optional_str(message.get("name")),
        tool_call_id=_optional_str(message.get("tool_call_id")),
        original_text_utf8_bytes=original,
        stored_text_utf8_bytes=stored,
        max_tool_result_bytes=max_bytes,
        content_kind=kind,
    )
    return clipped, clip


# --- internals ---------------------------------------------------------------------------

_Clipped = tuple[Any, int, int]  # (new content, original bytes, stored bytes)


def _check_cap(value: object) -> None:
    # Checked on every call (it is cheap) because a bad cap would break the size promise.
    if not is_int(value):
        raise ValueError(f"max_tool_result_bytes must be an int, got {value!r}")
    if value < MIN_TOOL_RESULT_BYTES:
        raise ValueError(
            f"max_tool_result_bytes must be >= {MIN_TOOL_RESULT_BYTES} so the ingress marker "
            f"fits, got {value!r}"
        )


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _surely_fits(text: str, max_bytes: int) -> bool:
    """Cheap check that avoids encoding: no code point takes more than four bytes."""
    n = len(text)
    return n * 4 <= max_bytes or (n <= max_bytes and text.isascii())


def _cut_prefix(encoded: bytes, budget: int) -> str:
    """Decode the longest prefix of ``encoded`` within ``budget`` bytes.

    ``encoded`` came from a "replace" encode, so it is valid UTF-8; stepping back over
    continuation bytes (0b10xxxxxx) puts the cut on a character boundary.
    """
    cut = min(budget, len(encoded))
    while cut > 0 and cut < len(encoded) and (encoded[cut] & 0xC0) == 0x80:
        cut -= 1
    return encoded[:cut].decode("utf-8")


def _clip_string(text: str, max_bytes: int) -> _Clipped | None:
    if _surely_fits(text, max_bytes):
        return None
    # One encode serves both the total size (needed for the marker) and the prefix.
    encoded = text.encode("utf-8", _ENCODE_ERRORS)
    original = len(encoded)
    if original <= max_bytes:
        return None
    marker = ingress_marker(original)
    prefix = _cut_prefix(encoded, max_bytes - len(marker))
    stored_text = prefix + marker
    return stored_text, original, utf8_byte_length(stored_text)


def _block_text(block: object) -> str | None:
    """The text of a text block, dict or host-typed (a typed block would otherwise be stored
    whole at any size)."""
    if isinstance(block, Mapping):
        text = block.get("text")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return text if block.get("type") == "text" and isinstance(text, str) else None  # pyright: ignore[reportUnknownMemberType]
    if callable(getattr(block, "model_dump", None)) and getattr(block, "type", None) == "text":
        text = getattr(block, "text", None)
        return text if isinstance(text, str) else None
    return None


def _with_text(block: object, text: str) -> dict[str, Any]:
    data: dict[str, Any] = (
        dict(block) if isinstance(block, Mapping) else block.model_dump()  # type: ignore[attr-defined]
    )
    data["text"] = text
    return data


def _is_block_list(content: list[Any]) -> bool:
    """A list counts as content blocks when every item looks like a block.

    Block-shaped means a dict with a string ``type`` or a typed object (e.g. a pydantic
    block model). Anything with a plain scalar, a nested list or a type-less dict is
    treated as JSON data instead.
    """
    if not content:
        return False
    for item in content:
        if isinstance(item, Mapping):
            if not isinstance(item.get("type"), str):
                return False
        elif item is None or isinstance(item, (str, int, float, list, tuple)):
            return False
    return True


def _clip_blocks(blocks: list[Any], max_bytes: int) -> _Clipped | None:
    texts: dict[int, str] = {}
    for i, block in enumerate(blocks):
        text = _block_text(block)
        if text is not None:
            texts[i] = text
    if not texts:
        return None
    total_chars = sum(len(t) for t in texts.values())
    if total_chars * 4 <= max_bytes or (
        total_chars <= max_bytes and all(t.isascii() for t in texts.values())
    ):
        return None
    sizes = {i: utf8_byte_length(t) for i, t in texts.items()}
    original = sum(sizes.values())
    if original <= max_bytes:
        return None

    marker = ingress_marker(original)
    remaining = max_bytes - len(marker)
    new_blocks: list[Any] = []
    stored = 0
    marker_placed = False
    last_kept_text_pos: int | None = None
    for i, block in enumerate(blocks):
        if i not in texts:
            new_blocks.append(block)  # untouched: not ours to read or slice
            continue
        if marker_placed:
            continue  # text past the cut is dropped; an empty text block is invalid upstream
        text = texts[i]
        if sizes[i] <= remaining:
            # Kept whole, but re-encode if it holds surrogates: the clipped result as a
            # whole must be valid UTF-8.
            safe = text if text.isascii() else text.encode("utf-8", _ENCODE_ERRORS).decode()
            new_blocks.append(block if safe == text else _with_text(block, safe))
            remaining -= sizes[i]
            stored += sizes[i]
            last_kept_text_pos = len(new_blocks) - 1
            continue
        if remaining == 0 and last_kept_text_pos is not None:
            # The budget ended exactly at a block boundary: the marker goes on the last
            # text that was kept rather than on an otherwise empty block.
            prev = new_blocks[last_kept_text_pos]
            new_blocks[last_kept_text_pos] = _with_text(prev, str(_block_text(prev)) + marker)
        else:
            prefix = _cut_prefix(text.encode("utf-8", _ENCODE_ERRORS), remaining)
            new_blocks.append(_with_text(block, prefix + marker))
            stored += utf8_byte_length(prefix)
        stored += len(marker)
        marker_placed = True
    return new_blocks, original, stored


def _json_default(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def _clip_json(content: dict[str, Any] | list[Any], max_bytes: int) -> _Clipped | None:
    # ensure_ascii=False: the model reads characters, so non-ASCII text is measured at its
    # UTF-8 size rather than as six-byte \\u escapes.
    text = json.dumps(content, ensure_ascii=False, default=_json_default)
    return _clip_string(text, max_bytes)


def admit(
    message: Mapping[str, Any], index: int, cap: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The message as stored (validated, timestamped, clipped to ``cap``) and the clip event.

    Raises before anything is stored when the message is structurally broken.
    """
    validate_message(message, index)
    stored = dict(message)
    metadata = dict(stored.get("metadata") or {})
    if "timestamp" not in metadata:
        metadata["timestamp"] = _utc_timestamp()
    stored["metadata"] = metadata
    clipped, clip = clip_tool_result(stored, cap)
    if clip is None:
        return stored, None
    return clipped, clip.payload()


def _utc_timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
