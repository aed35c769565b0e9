"""Per-message token estimator: fast, standard library only, no tokenizer.

Signature (meant to be swappable for any other estimator with the same shape)::

    estimate_message_tokens(message: Mapping[str, Any], *, family: str | None = None) -> int

``family`` picks the tokenizer family the count is meant for (see ``FAMILIES`` and
``family_for_model``). ``None`` is the conservative mode: the message is priced for every family
and the largest count wins, so it is never below any family's estimate for the same message.

What is counted is what a provider bills for the message payload, nothing else:

* text segments, each on its own: string ``content``, ``text`` of text blocks, reasoning and
  thinking text, each tool call's name and arguments (dict arguments as their JSON text), tool
  result bodies; never roles, ids, signatures, metadata, JSON escaping of the envelope or base64;
* 4 tokens per message and 4 per tool call for the framing the text does not show;
* images by pixel size read from the PNG / JPEG / GIF / WebP header of the first few KB of the
  base64 data, priced with OpenAI's high-detail tiles (o200k) or Anthropic's ``w*h/750`` (Claude);
  an image whose size cannot be read (plain URL, unknown format) costs the family's maximum price;
* a redacted (opaque) thinking block costs a small flat allowance.

Text model: each segment is reduced to eleven character-class counts (words, digit runs,
punctuation runs, line breaks, CJK characters...) with C-level operations (``_features``: one
``bytes.translate`` and big-integer bit operations). BPE tokenizers mostly cut at class
boundaries, so tokens are close to a per-family linear combination of the counts (``_price``).
The coefficients were fitted per family on the shared corpus of agent transcripts (prose, code,
logs, JSON, tool arguments, CJK: per-message MAPE about 5%) and then raised 2%, so the estimate
leans to overcounting.
"""

from __future__ import annotations

__all__ = [
    "FAMILIES",
    "MESSAGE_OVERHEAD",
    "REDACTED_THINKING_TOKENS",
    "TOOL_CALL_OVERHEAD",
    "estimate_message_tokens",
    "family_for_model",
]

import functools
import json
import json.encoder
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..vocabulary._messages import (
    COUNTED_CALL_BLOCK_TYPES,
    IMAGE_BLOCK_TYPES,
    MAX_DEPTH,
    TEXT_BLOCK_TYPES,
    is_mapping,
)
from ._features import segments_counts
from ._images import image_from_url, image_size, image_tokens
from ._price import COEFFICIENTS, FAMILIES, float_price, text_price

MESSAGE_OVERHEAD = 4
TOOL_CALL_OVERHEAD = 4
# Opaque redacted thinking is not part of the visible context of later turns; keep it non-free.
REDACTED_THINKING_TOKENS = 32

# Keys of unknown blocks that carry no billed text: identifiers, signatures, opaque state.
_OPAQUE_KEYS = frozenset(
    ("type", "id", "call_id", "tool_call_id", "tool_use_id", "signature", "encrypted_content",
     "cache_control", "metadata", "visibility", "media_type", "mime_type")
)  # fmt: skip
_MESSAGE_TEXT_KEYS = ("reasoning_content", "reasoning", "thinking")


class _Tally:
    """What one message contributes: text segments, calls, image sizes, flat extras."""

    __slots__ = ("call_ids", "calls", "extra", "images", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.images: list[tuple[int, int] | None] = []
        self.call_ids: set[str] = set()
        self.calls = 0
        self.extra = 0


def _plain(value: Any) -> Any:
    """Typed blocks (pydantic models) as plain dicts; None if that fails."""
    try:
        dump = getattr(value, "model_dump", None)
        return dump() if callable(dump) else None
    except Exception:
        return None


def _content(value: Any, tally: _Tally, depth: int) -> None:
    if isinstance(value, str):
        tally.texts.append(value)
    elif value is None or isinstance(value, bool):
        return
    elif depth > MAX_DEPTH:
        _deep_texts(value, tally)
    elif is_mapping(value):
        _block(value, tally, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _content(item, tally, depth + 1)
    elif isinstance(value, float):
        tally.texts.append(repr(value))
    elif isinstance(value, int):
        tally.extra += value.bit_length() // 10 + 1  # about one token per three digits
    else:
        _content(_plain(value), tally, depth + 1)


def _deep_texts(value: Any, tally: _Tally) -> None:
    """Every string below a hostile nesting depth, walked without recursion (never free)."""
    stack, seen = [value], set[int]()
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            tally.texts.append(item)
        elif isinstance(item, Mapping | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, Mapping) else item)  # type: ignore[arg-type]


@functools.cache
def _arguments_json() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, default=str)`` for a value that is not a string,
    built on first use (not at import, where no test of this function could reach it) and
    without building an encoder per call (half the cost of ``JSONEncoder.encode``, which builds
    the C encoder each time). It keeps no circular-reference markers (shared between calls they
    would outlive a failed call): a cycle recurses until RecursionError instead of raising
    ValueError, and either way the caller walks the value instead. Without the C encoder, or
    if it does not write what the encoder's own method writes, that method it is."""
    encoder = json.JSONEncoder(ensure_ascii=False, default=str)
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # private: the C accelerator
    try:
        chunks = make(
            None, str, json.encoder.encode_basestring, None, encoder.key_separator,
            encoder.item_separator, encoder.sort_keys, encoder.skipkeys, encoder.allow_nan,
        )  # fmt: skip
        probe = {"é": [1, 2.5, None, True, float("inf")], 3: {"k": "v\n"}}
        if "".join(chunks(probe, 0)) == encoder.encode(probe):
            return lambda value: "".join(chunks(value, 0))
    except Exception:  # none, or another signature: the encoder's own method
        pass
    return encoder.encode


def _arguments(value: Any, tally: _Tally, depth: int) -> None:
    if value is None or isinstance(value, str):
        _content(value, tally, depth)
        return
    try:  # structured arguments reach the model as their JSON text
        tally.texts.append(_arguments_json()(value))
    except Exception:  # circular, huge ints, odd keys, a failing __str__: walk it instead
        _content(value, tally, depth)


def _tool_call(call: Any, tally: _Tally, depth: int) -> None:
    if not is_mapping(call):
        call = _plain(call)
        if not isinstance(call, Mapping):
            return
    tally.calls += 1
    call_id = call.get("id")
    if isinstance(call_id, str):
        tally.call_ids.add(call_id)
    function = call.get("function")
    spec: Mapping[Any, Any] = function if is_mapping(function) else call
    _content(spec.get("name") or call.get("tool"), tally, depth)
    arguments = spec.get("arguments")
    _arguments(spec.get("input") if arguments is None else arguments, tally, depth)


def _image_block(block: Mapping[Any, Any]) -> tuple[int, int] | None:
    source = block.get("source")
    if isinstance(source, Mapping):
        data = source.get("data")
        if isinstance(data, str):
            return image_size(data)
        return image_from_url(source.get("url"))
    url = block.get("image_url", block.get("url"))
    return image_from_url(url.get("url") if isinstance(url, Mapping) else url)


def _block(block: Mapping[Any, Any], tally: _Tally, depth: int) -> None:
    kind = block.get("type")
    if not isinstance(kind, str):
        kind = ""
    if kind in TEXT_BLOCK_TYPES:
        _content(block.get("text"), tally, depth)
    elif kind == "thinking":
        _content(block.get("thinking"), tally, depth)  # signature / encrypted state are opaque
    elif kind == "redacted_thinking":
        tally.extra += REDACTED_THINKING_TOKENS
    elif kind == "reasoning":
        _content(block.get("summary"), tally, depth)
        _content(block.get("content"), tally, depth)
    elif kind in COUNTED_CALL_BLOCK_TYPES:
        block_id = block.get("id")
        if not (isinstance(block_id, str) and block_id in tally.call_ids):  # not in tool_calls
            _tool_call(block, tally, depth)
    elif kind in IMAGE_BLOCK_TYPES:
        tally.images.append(_image_block(block))
    else:  # tool results and unknown blocks: every string value that is not an id or state
        for key, value in block.items():
            if key in _OPAQUE_KEYS:
                continue
            if isinstance(value, str) and value.startswith("data:image/"):
                tally.images.append(image_from_url(value))
            else:
                _content(value, tally, depth)


def _lean(message: dict[Any, Any]) -> tuple[list[str], int] | None:
    """The texts and calls of a message of the common shapes, or None for any other shape.

    The same reading as the general walk (``_content``, ``_block``, ``_tool_call``) for what it
    accepts: string content, lists of strings and text / thinking blocks, call blocks that
    repeat a ``tool_calls`` entry, ``tool_calls`` of dicts with string or JSON-able arguments.
    Anything else (images, tool results, unknown blocks, typed objects, numbers, nesting) goes
    to the general walk, from the start. Three times faster on a resume, where every message is
    read; ``tests/sizing/test_estimate.py`` compares the two on generated messages.
    """
    texts: list[str] = []
    calls = 0
    call_ids: set[str] = set()
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if type(tool_calls) is not list:
            return None
        for call in tool_calls:
            if type(call) is not dict:
                return None
            calls += 1
            call_id = call.get("id")
            if isinstance(call_id, str):
                call_ids.add(call_id)
            spec = call.get("function")
            if spec is None:
                spec = call
            elif type(spec) is not dict:
                return None
            name = spec.get("name") or call.get("tool")
            if isinstance(name, str):
                if name:
                    texts.append(name)
            elif name is not None:
                return None
            arguments = spec.get("arguments")
            if arguments is None:
                arguments = spec.get("input")
            if isinstance(arguments, str):
                if arguments:
                    texts.append(arguments)
            elif arguments is not None:
                try:
                    texts.append(_arguments_json()(arguments))
                except Exception:
                    return None
    if message.get("function_call") is not None:
        return None
    content = message.get("content")
    if isinstance(content, str):
        if content:
            texts.append(content)
    elif type(content) is list:
        for block in content:
            if type(block) is dict:
                kind = block.get("type")
                if type(kind) is not str:
                    return None
                if kind in TEXT_BLOCK_TYPES:
                    text = block.get("text")
                elif kind == "thinking":
                    text = block.get("thinking")
                elif kind in COUNTED_CALL_BLOCK_TYPES:
                    block_id = block.get("id")
                    if not (isinstance(block_id, str) and block_id in call_ids):
                        return None
                    continue  # counted in tool_calls
                else:
                    return None
            else:
                text = block
            if isinstance(text, str):
                if text:
                    texts.append(text)
            elif text is not None:
                return None
    elif content is not None:
        return None
    for key in _MESSAGE_TEXT_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            texts.append(value)
    return texts, calls


def estimate_message_tokens(message: Mapping[str, Any], *, family: str | None = None) -> int:
    """Tokens ``message`` adds to a request for ``family`` (None: the largest of all families).

    Raises ValueError for an unknown family; never raises on the message, whatever its shape.
    """
    if family is None:
        families = FAMILIES
    elif isinstance(family, str) and family in COEFFICIENTS:
        families = (family,)
    else:
        raise ValueError(f"unknown tokenizer family {family!r}; expected one of {FAMILIES} or None")
    if type(message) is dict:
        lean = _lean(message)
        if lean is not None:
            texts, calls = lean
            counts = segments_counts(texts)
            return MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls + text_price(counts, families)
    tally = _Tally()
    if not is_mapping(message):  # a typed Message, or garbage counted as content
        plain = _plain(message)
        message = plain if isinstance(plain, Mapping) else {"content": message}
    calls = message.get("tool_calls")
    if isinstance(calls, list | tuple):
        for call in calls:
            _tool_call(call, tally, 1)
    function_call = message.get("function_call")
    if function_call is not None:  # a typed one too, as a listed call is read
        _tool_call(function_call, tally, 1)
    _content(message.get("content"), tally, 0)
    for key in _MESSAGE_TEXT_KEYS:
        value = message.get(key)
        if isinstance(value, str):
            tally.texts.append(value)
    # The model is linear: sum the counts of all segments, then price them once per family.
    counts = segments_counts([text for text in tally.texts if text])
    images = tally.images
    if not images:
        priced = text_price(counts, families)
    else:
        priced = max(
            float_price(counts, name) + sum(image_tokens(size, name) for size in images)
            for name in families
        )
    return MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * tally.calls + tally.extra + priced


# ---------------------------------------------------------------- model names
_OPENAI_O200K = re.compile(
    r"(?:^|[/.:])(?:gpt-(?:4o|4\.1|4\.5|5|oss)|chatgpt-4o|codex-mini|o[1-9](?:-|$))"
)
_CLAUDE_VERSION = re.compile(
    r"claude-(?:(\d+)(?:[-.](\d{1,2}))?-(?:opus|sonnet|haiku)"  # claude-3-5-sonnet-20241022
    r"|(?:opus|sonnet|haiku)-(\d+)(?:[-.](\d{1,2})(?!\d))?)"  # claude-opus-4-7; -2025.. is a date
)


def family_for_model(model_name: str | None) -> str | None:
    """Tokenizer family of a provider model name; None when unknown (use conservative mode).

    Claude models up to version 4.6 (all tiers) are ``claude3`` and 4.7 or later ``claude47``;
    only Opus 4.7 is documented as the first of the new tokenizer, so a later Sonnet or Haiku is
    assumed to share it (it counts more). A Claude name whose version cannot be read is
    ``claude47`` for the same reason. OpenAI GPT-4o, 4.1, 4.5, 5.x, o-series and gpt-oss are
    ``o200k``; older GPT-4 / 3.5 use another tokenizer and return None.
    """
    if not isinstance(model_name, str):
        return None
    name = model_name.strip().lower()
    if "claude" in name:
        match = _CLAUDE_VERSION.search(name)
        if match is None:
            return "claude47"
        major, minor = match.group(1, 2) if match.group(1) else match.group(3, 4)
        return "claude3" if (int(major), int(minor or 0)) < (4, 7) else "claude47"
    return "o200k" if _OPENAI_O200K.search(name) else None
