"""Ingress cap for tool-result text.

A tool result is checked once, before it is admitted to the history. If its text is
larger than the configured number of UTF-8 bytes, the stored copy keeps a prefix that
ends on a character boundary, followed by one bracketed marker that tells the model how
large the original was and how to get the rest. The dropped text is not kept anywhere.

What is a tool result: whatever pairing reads as one. A ``tool`` or ``function`` message is
one result, whatever its content holds; in a user message each ``tool_result`` block is one
result (its ``output`` or ``content`` payload), capped on its own as the tool message it stands
for would be. Each clipped result is reported by one ``context:tool_result_ingress_truncated``.

What counts as "text" of a result:

* string content (or a string payload): the string itself;
* a list of content blocks: the string ``text`` of every block the view sends as text (type
  ``text``, ``input_text`` or ``output_text``: ``_project.PROJECTED_TEXT_TYPES``), dicts or
  typed objects with ``model_dump()`` (a clipped one is stored as a dict), and the
  payload of a ``tool_result`` block among them (a string, or such text blocks). Their bytes
  share one budget in list order. Image, audio, unknown and other typed blocks are neither
  measured nor touched;
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

It never mutates its input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from ..vocabulary._json_text import json_text
from ..vocabulary._messages import RESULT_BLOCK_TYPES, RESULT_ROLES, block_dict
from ..vocabulary._numbers import is_int
from ._project import PROJECTED_TEXT_TYPES

__all__ = [
    "INGRESS_MARKER_TEMPLATE",
    "MIN_TOOL_RESULT_BYTES",
    "IngressClip",
    "clip_tool_result",
    "clip_tool_results",
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

ContentKind = Literal["string", "text_blocks"]

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
    """Apply the ingress cap to a message that carries at most one result.

    Returns ``(message, None)`` - the same object - for anything that carries no tool result
    or whose text fits. Otherwise returns a new message dict (other keys shared with the
    input) with clipped content, plus an :class:`IngressClip` describing the (first) clip.
    Raises ``ValueError`` for a cap too small to hold the marker.
    """
    clipped, clips = clip_tool_results(message, max_bytes)
    return clipped, clips[0] if clips else None


def clip_tool_results(
    message: dict[str, Any], max_bytes: int
) -> tuple[dict[str, Any], list[IngressClip]]:
    """Apply the ingress cap to every tool result ``message`` carries, one clip per result.

    What pairing reads as a result is capped: a ``tool`` or ``function`` message as a whole
    (whatever its content holds), and each ``tool_result`` block of a user message on its own,
    as the separate tool message it stands for would be.
    """
    _check_cap(max_bytes)
    role = message.get("role")
    content = message.get("content")
    name = _optional_str(message.get("name"))
    if role in RESULT_ROLES:
        result = _clip_payload(content, max_bytes)
        if result is None:
            return message, []
        new_content, original, stored, kind = result
        own = _optional_str(message.get("tool_call_id") or message.get("tool_use_id"))
        clip = IngressClip(
            name, own or _first_result_id(content), original, stored, max_bytes, kind
        )
        return {**message, "content": new_content}, [clip]
    if role != "user" or not isinstance(content, list):
        return message, []
    new_blocks: list[Any] = list(content)  # pyright: ignore[reportUnknownArgumentType]
    clips: list[IngressClip] = []
    for i, block in enumerate(new_blocks):
        data = _result_data(block)
        if data is None:
            continue
        key = _payload_key(data)
        result = _clip_payload(data.get(key), max_bytes)
        if result is None:
            continue
        new_payload, original, stored, kind = result
        new_blocks[i] = {**data, key: new_payload}
        call_id = _optional_str(data.get("tool_call_id") or data.get("tool_use_id"))
        clips.append(IngressClip(name, call_id, original, stored, max_bytes, kind))
    if not clips:
        return message, []
    return {**message, "content": new_blocks}, clips


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


def _clip_payload(content: object, max_bytes: int) -> tuple[Any, int, int, ContentKind] | None:
    """Clip one result's payload: (new payload, original bytes, stored bytes, kind)."""
    result: _Clipped | None
    kind: ContentKind = "string"
    if isinstance(content, str):
        result = _clip_string(content, max_bytes)
    elif isinstance(content, list) and _is_block_list(content):  # pyright: ignore[reportUnknownArgumentType]
        result = _clip_blocks(content, max_bytes)  # pyright: ignore[reportUnknownArgumentType]
        kind = "text_blocks"
    elif isinstance(content, (dict, list)):
        result = _clip_json(content, max_bytes)  # pyright: ignore[reportUnknownArgumentType]
    else:
        return None  # None, numbers and other scalars carry no text worth capping
    return None if result is None else (*result, kind)


def _clip_texts(texts: list[str], max_bytes: int) -> tuple[list[str | None], int, int] | None:
    """Clip texts that share one budget in order: each kept, cut (the marker after the cut)
    or dropped (``None``: past the cut), plus the original and stored byte counts."""
    total_chars = sum(len(t) for t in texts)
    if total_chars * 4 <= max_bytes or (
        total_chars <= max_bytes and all(t.isascii() for t in texts)
    ):
        return None
    sizes = [utf8_byte_length(t) for t in texts]
    original = sum(sizes)
    if original <= max_bytes:
        return None
    marker = ingress_marker(original)
    remaining = max_bytes - len(marker)
    out: list[str | None] = []
    stored = 0
    # The texts' total is over the cap, so one of them is the first that does not fit
    # beside the marker. One that fills the budget exactly is that one too: cut nowhere, it
    # carries the marker, which never goes on an otherwise empty text after it.
    for text, size in zip(texts, sizes, strict=True):
        if size >= remaining:
            break
        # Kept whole, but re-encoded if it holds surrogates: the clipped result as a whole
        # must be valid UTF-8.
        out.append(text if text.isascii() else text.encode("utf-8", _ENCODE_ERRORS).decode())
        remaining -= size
        stored += size
    prefix = _cut_prefix(texts[len(out)].encode("utf-8", _ENCODE_ERRORS), remaining)
    out.append(prefix + marker)
    stored += utf8_byte_length(prefix) + len(marker)
    # Text past the cut is dropped; an empty text block is invalid upstream.
    out += [None] * (len(texts) - len(out))
    return out, original, stored


def _clip_string(text: str, max_bytes: int) -> _Clipped | None:
    if _surely_fits(text, max_bytes):
        return None
    result = _clip_texts([text], max_bytes)
    if result is None:
        return None
    (stored_text,), original, stored = result
    return stored_text, original, stored


def _block_text(block: object) -> str | None:
    """The text of a block the view sends as text, dict or typed (or it is stored whole)."""
    if isinstance(block, Mapping):
        text, kind = block.get("text"), block.get("type")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return text if kind in PROJECTED_TEXT_TYPES and isinstance(text, str) else None
    typed = callable(getattr(block, "model_dump", None))
    if typed and getattr(block, "type", None) in PROJECTED_TEXT_TYPES:
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


def _result_data(block: object) -> Mapping[str, Any] | None:
    data = block_dict(block)
    return data if data is not None and data.get("type") in RESULT_BLOCK_TYPES else None


def _payload_key(data: Mapping[str, Any]) -> str:
    """Where a result block carries its payload: the host's ``output``, Anthropic's ``content``."""
    return "output" if "output" in data or "content" not in data else "content"


def _first_result_id(content: object) -> str | None:
    if isinstance(content, list):
        for block in content:  # pyright: ignore[reportUnknownVariableType]
            data = _result_data(block)
            if data is not None:
                return _optional_str(data.get("tool_call_id") or data.get("tool_use_id"))
    return None


_Slot = tuple[int, int | None, str]
"""Where a text sits: (block, item of a result block's payload list or None, key)."""


def _text_slots(blocks: list[Any]) -> tuple[list[_Slot], list[str]]:
    """The texts of a block list in order: text blocks, and a result block's payload (a
    string, or the text blocks of a list), which is the result's text too."""
    slots: list[_Slot] = []
    texts: list[str] = []
    for i, block in enumerate(blocks):
        text = _block_text(block)
        if text is not None:
            slots.append((i, None, "text"))
            texts.append(text)
            continue
        data = _result_data(block)
        if data is None:
            continue  # image, audio, unknown and other typed blocks: not ours to read
        key = _payload_key(data)
        payload = data.get(key)
        if isinstance(payload, str):
            slots.append((i, None, key))
            texts.append(payload)
        elif isinstance(payload, list):
            for j, item in enumerate(payload):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
                inner = _block_text(item)
                if inner is not None:
                    slots.append((i, j, key))
                    texts.append(inner)
    return slots, texts


def _clip_blocks(blocks: list[Any], max_bytes: int) -> _Clipped | None:
    slots, texts = _text_slots(blocks)
    if not texts:
        return None
    result = _clip_texts(texts, max_bytes)
    if result is None:
        return None
    new_texts, original, stored = result
    out: list[Any] = list(blocks)
    dropped: set[int] = set()
    items: dict[int, dict[int, str | None]] = {}
    for (i, j, key), old, new in zip(slots, texts, new_texts, strict=True):
        if j is not None:
            items.setdefault(i, {})[j] = new
        elif new == old:
            continue  # untouched: the same object
        elif key == "text":
            if new is None:
                dropped.add(i)
            else:
                out[i] = _with_text(blocks[i], new)
        else:
            out[i] = {**_result_data(blocks[i]), key: new or ""}  # type: ignore[dict-item]
    for i, changes in items.items():
        data = _result_data(blocks[i])
        assert data is not None  # a slot with an item index is a result block's
        key = _payload_key(data)
        kept: list[Any] = []
        for j, item in enumerate(data[key]):
            if j not in changes:
                kept.append(item)  # not a text: untouched
            elif (new := changes[j]) is not None:
                kept.append(item if new == _block_text(item) else _with_text(item, new))
        out[i] = {**data, key: kept}
    return [b for i, b in enumerate(out) if i not in dropped], original, stored


def _clip_json(content: dict[str, Any] | list[Any], max_bytes: int) -> _Clipped | None:
    # ensure_ascii=False: the model reads characters, so non-ASCII text is measured at its
    # UTF-8 size rather than as six-byte \\u escapes.
    return _clip_string(json_text(content), max_bytes)
