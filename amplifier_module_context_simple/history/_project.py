"""What the view sends for a message: the history's message, projected onto the host's model.

The history keeps every message as admitted, vendor blocks and all. The orchestrator builds
``amplifier_core.message_models.Message(**m)`` from each view message and a ``ChatRequest``
from the list, and either refuses anything outside the host's vocabulary. So the view sends a
projection: an explicit mapping wherever the host has an equivalent (OpenAI and Anthropic
images, ``tool_use``, Anthropic ``tool_result``, ``input_text``/``output_text``, ``None``
content), a text block only for what has none, and the view's tool-call ids (``_ids``).

Whatever the host already accepts is returned as the very same object: identity is what lets
the prefix cache and the provider's prompt cache see an unchanged message. The projection is
a pure function of the message and its ids, so it is the same on every request. Each change
is reported with a kind from :data:`PROJECTION_KINDS`, so a tool can count them.
"""

from __future__ import annotations

__all__ = [
    "BINARY_TYPES",
    "BLOCK_JSON",
    "BLOCK_PLACEHOLDER",
    "CONTENT_JSON",
    "DEEPER",
    "FIELD",
    "HOST_BLOCK_TYPES",
    "ID_DERIVED",
    "ID_RENAMED",
    "IMAGE",
    "METADATA",
    "NULL_CONTENT",
    "ORPHAN_DROPPED",
    "PAIRING_KINDS",
    "PLACEHOLDER_ADDED",
    "PROJECTED_TEXT_TYPES",
    "PROJECTION_KINDS",
    "REPAIR_KINDS",
    "STRAY_DROPPED",
    "TEXT",
    "TEXT_FIELD_OF",
    "TOOL_CALL",
    "TOOL_RESULT",
    "Projected",
    "host_valid_block",
    "json_text",
    "project",
]

import json
from collections.abc import Mapping
from typing import Any

from ..vocabulary._json_text import DEEPER, json_text
from ..vocabulary._messages import (
    CALL_BLOCK_TYPES,
    OPENAI_IMAGE_BLOCK_TYPES,
    RESULT_ROLES,
    block_dict,
    read_block,
)
from ..vocabulary._public import sent_metadata
from ._ids import Ids, tool_block_fits, usable

# Kinds of view repair, the first token of every ``view_repairs`` entry ("kind: detail").
IMAGE = "image"
TOOL_CALL = "tool-call"
TOOL_RESULT = "tool-result"
TEXT = "text"
NULL_CONTENT = "null-content"
CONTENT_JSON = "content-json"
BLOCK_JSON = "block-json"
BLOCK_PLACEHOLDER = "block-placeholder"
METADATA = "metadata"
FIELD = "field"
ID_RENAMED = "id-renamed"
ID_DERIVED = "id-derived"
ORPHAN_DROPPED = "orphan-dropped"
STRAY_DROPPED = "stray-dropped"
PLACEHOLDER_ADDED = "placeholder-added"
DUPLICATE_CALL = "duplicate-call-dropped"
PROJECTION_KINDS = frozenset(
    {
        IMAGE, TOOL_CALL, TOOL_RESULT, TEXT, NULL_CONTENT, CONTENT_JSON, BLOCK_JSON,
        BLOCK_PLACEHOLDER, METADATA, FIELD, ID_RENAMED, ID_DERIVED, DUPLICATE_CALL,
    }
)  # fmt: skip
REPAIR_KINDS = PROJECTION_KINDS | {ORPHAN_DROPPED, STRAY_DROPPED, PLACEHOLDER_ADDED}
PAIRING_KINDS = frozenset({ORPHAN_DROPPED, STRAY_DROPPED, PLACEHOLDER_ADDED})

PROJECTED_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})  # ingress caps these too
# Binary payloads are never sent as JSON text: the model cannot read base64.
BINARY_TYPES = frozenset(
    {"audio", "input_audio", "document", "file", "input_file", "video", "input_video"}
)
# What the host model requires of each of its block types.
_HOST_FIELDS: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "text": (("text", str),),
    "thinking": (("thinking", str),),
    "redacted_thinking": (("data", str),),
    "tool_call": (("id", str), ("name", str), ("input", Mapping)),
    "tool_result": (("tool_call_id", str),),
    "image": (("source", Mapping),),
    "reasoning": (("content", list), ("summary", list)),
}
HOST_BLOCK_TYPES = frozenset(_HOST_FIELDS)
TEXT_FIELD_OF = {
    kind: fields[0][0]
    for kind, fields in _HOST_FIELDS.items()
    if kind != "tool_result" and len(fields) == 1 and fields[0][1] is str
}
"""Host block types that need one string field and nothing else (a dict of one is sent as is)."""

Projected = tuple[Mapping[str, Any], tuple[str, ...]]


def host_valid_block(data: Mapping[str, Any]) -> bool:
    fields = _HOST_FIELDS.get(data.get("type"))  # type: ignore[arg-type]
    if fields is None:
        return False
    if data["type"] == "tool_result" and "output" not in data:
        return False
    return all(isinstance(data.get(key), kind) for key, kind in fields)


def project(message: Mapping[str, Any], ids: Ids, *, json_cap: int) -> Projected:
    """The sent form of ``message`` and the kinds of change made (none: the same object).

    ``ids`` are the view ids the history's ``IdAssigner`` gave this message: one derived id
    for each call or result of it without a usable id of its own."""
    kinds: list[str] = []
    changes: dict[str, Any] = {}
    content = message.get("content")
    if content is None:
        changes["content"] = ""
        kinds.append(NULL_CONTENT)
    elif isinstance(content, list):
        role = message.get("role")
        blocks = _project_blocks(content, ids, json_cap, kinds, role)  # pyright: ignore[reportUnknownArgumentType]
        if blocks is not None:
            changes["content"] = blocks
    elif not isinstance(content, str):
        changes["content"] = _json(content)
        kinds.append(CONTENT_JSON)
    calls = _project_tool_calls(message.get("tool_calls"), ids, kinds)
    if calls is not None:
        changes["tool_calls"] = calls
    _project_fields(message, ids, changes, kinds)
    if ids.call_map or ids.result_map:
        kinds.append(ID_RENAMED)
    if ids.idless_calls or ids.idless_results:
        kinds.append(ID_DERIVED)
    if not changes:
        return message, ()
    return {**message, **changes}, tuple(dict.fromkeys(kinds))


def _project_fields(
    message: Mapping[str, Any], ids: Ids, changes: dict[str, Any], kinds: list[str]
) -> None:
    meta = message.get("metadata")
    if meta is not None:
        sent, repaired = sent_metadata(meta)
        if sent is not meta:
            changes["metadata"] = sent
        if repaired:
            kinds.append(METADATA)
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        changes["name"] = str(name)
        kinds.append(FIELD)
    if message.get("role") in RESULT_ROLES:
        own = message.get("tool_call_id") or message.get("tool_use_id")
        if usable(own):
            renamed = ids.result_map.get(own)  # type: ignore[arg-type]
            if renamed is not None or "tool_call_id" not in message:
                changes["tool_call_id"] = renamed or own
                if renamed is None:
                    kinds.append(FIELD)  # ``tool_use_id`` only: the host reads ``tool_call_id``
        elif ids.results:
            # No usable id of its own: it carries the one it was paired by.
            changes["tool_call_id"] = ids.results[0]
    elif message.get("tool_call_id") is not None and not isinstance(
        message.get("tool_call_id"), str
    ):
        changes["tool_call_id"] = str(message.get("tool_call_id"))
        kinds.append(FIELD)


def _project_tool_calls(tool_calls: object, ids: Ids, kinds: list[str]) -> list[Any] | None:
    """``tool_calls`` stay verbatim (OpenAI shape included) unless an id must change."""
    if not isinstance(tool_calls, list) or not (
        ids.call_map or ids.idless_calls or ids.repeated_calls
    ):
        return None
    out: list[Any] = []
    idless = 0
    seen: set[str] = set()
    for call in tool_calls:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(call, Mapping):
            out.append(call)
            continue
        raw = call.get("id") or call.get("tool_call_id")  # pyright: ignore[reportUnknownMemberType]
        if usable(raw) and raw in seen:
            # The same id twice in one message: providers refuse it, and pairing already
            # reads both as one call (a second result for it is dropped as stray).
            kinds.append(DUPLICATE_CALL)
            continue
        if usable(raw):
            seen.add(raw)  # type: ignore[arg-type]
            new = ids.call_map.get(raw)  # type: ignore[arg-type]
        else:
            new = ids.idless_calls[idless]
            idless += 1
        out.append(call if new is None else {**call, "id": new})  # pyright: ignore[reportUnknownArgumentType]
    return out


class _IdCursor:
    """Hands out the view ids of one message's blocks in order."""

    def __init__(self, ids: Ids) -> None:
        self.ids = ids
        self.idless_calls = 0
        self.idless_results = 0
        self.seen_calls: set[str] = set()

    # The assigner reads calls and results where the projection sends them as such (calls of
    # assistant messages, results of user and tool messages: ``tool_block_fits``) and derives
    # one id per id-less one (per id-less call of the larger of the message's two sources), so
    # the n-th id-less block always has its id.

    def call(self, raw: object) -> str:
        if usable(raw):
            return self.ids.call_map.get(raw, raw)  # type: ignore[arg-type]
        self.idless_calls += 1
        return self.ids.idless_calls[self.idless_calls - 1]

    def result(self, raw: object) -> str:
        if usable(raw):
            return self.ids.result_map.get(raw, raw)  # type: ignore[arg-type]
        self.idless_results += 1
        return self.ids.idless_results[self.idless_results - 1]


def _project_blocks(
    content: list[Any], ids: Ids, cap: int, kinds: list[str], role: object
) -> list[Any] | None:
    cursor = _IdCursor(ids)
    out: list[Any] = []
    changed = False
    for block in content:
        data = block_dict(block) if ids.repeated_calls else None
        if data is not None and data.get("type") in CALL_BLOCK_TYPES:
            raw = data.get("id")
            if usable(raw) and raw in cursor.seen_calls:
                kinds.append(DUPLICATE_CALL)
                changed = True
                continue
            if usable(raw):
                cursor.seen_calls.add(raw)  # type: ignore[arg-type]
        sent = _project_block(block, cursor, cap, kinds, role)
        changed = changed or sent is not block
        out.append(sent)
    return out if changed else None


def _project_block(
    block: object, cursor: _IdCursor, cap: int, kinds: list[str], role: object
) -> Any:
    if isinstance(block, str):
        kinds.append(TEXT)
        return {"type": "text", "text": block}
    data = read_block(block, "a content block")
    if data is None:
        kinds.append(BLOCK_JSON)
        return {"type": "text", "text": _json(block)}
    kind = data.get("type")
    if not tool_block_fits(kind, role):
        # A call or a result where none can stand: what it says goes out as text.
        return _as_text(data, cap, kinds)
    if kind in CALL_BLOCK_TYPES:
        return _call_block(block, data, cursor, kinds)
    if kind == "tool_result":
        return _result_block(block, data, cursor, kinds)
    if host_valid_block(data):
        # A typed object is sent as itself only when it is one of the host's own models.
        if isinstance(block, Mapping) or type(block).__module__.startswith("amplifier_core"):
            return block
        return dict(data)
    if kind in OPENAI_IMAGE_BLOCK_TYPES:
        image = _image(data)
        if image is not None:
            kinds.append(IMAGE)
            return image
    if kind in PROJECTED_TEXT_TYPES and isinstance(data.get("text"), str):
        kinds.append(TEXT)
        return {"type": "text", "text": data["text"]}
    return _as_text(data, cap, kinds)


def _call_block(block: object, data: Mapping[str, Any], cursor: _IdCursor, kinds: list[str]) -> Any:
    view_id = cursor.call(data.get("id"))
    if data.get("type") == "tool_call" and host_valid_block(data) and view_id == data.get("id"):
        return block
    kinds.append(TOOL_CALL)
    name = data.get("name")
    return {
        "type": "tool_call",
        "id": view_id,
        "name": name if isinstance(name, str) else "",
        "input": _as_input(data.get("input", data.get("arguments"))),
    }


def _result_block(
    block: object, data: Mapping[str, Any], cursor: _IdCursor, kinds: list[str]
) -> Any:
    raw = data.get("tool_call_id") or data.get("tool_use_id")
    view_id = cursor.result(raw)
    if host_valid_block(data) and view_id == raw:
        return block
    kinds.append(TOOL_RESULT)
    sent: dict[str, Any] = {
        "type": "tool_result",
        "tool_call_id": view_id,
        "output": data["output"] if "output" in data else data.get("content", ""),
    }
    if "is_error" in data:
        sent["is_error"] = data["is_error"]
    return sent


def _as_input(value: object) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"value": value}
        if isinstance(parsed, dict):
            return parsed  # pyright: ignore[reportUnknownVariableType]
    return {} if value is None else {"value": value}


def _image(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """OpenAI chat (``image_url``) and Responses (``input_image``) images as host images."""
    url = data.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if url is None:
        url = data.get("url")
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("data:") and ";base64," in url:
        media_type, _, payload = url[5:].partition(";base64,")
        source = {"type": "base64", "media_type": media_type or "image/png", "data": payload}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _as_text(data: Mapping[str, Any], cap: int, kinds: list[str]) -> dict[str, Any]:
    """A block with no host equivalent: its JSON when small, else a one-line placeholder."""
    text = _json(data)
    size = len(text.encode("utf-8", "replace"))
    kind = data.get("type")
    if kind not in BINARY_TYPES and size <= cap:
        kinds.append(BLOCK_JSON)
        return {"type": "text", "text": text}
    kinds.append(BLOCK_PLACEHOLDER)
    media = _media_type(data)
    return {
        "type": "text",
        "text": f"[{kind} block not shown: media type {media}, {size} bytes]",
    }


def _media_type(data: Mapping[str, Any]) -> str:
    for holder in (data, data.get("source"), data.get("input_audio"), data.get("file")):
        if isinstance(holder, Mapping):
            for key in ("media_type", "mime_type", "mimeType", "format"):
                value = holder.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                if isinstance(value, str) and value:
                    return value
    return "unknown"


def _json(value: object) -> str:
    try:
        return json_text(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)
