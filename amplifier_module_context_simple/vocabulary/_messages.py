"""The message vocabulary: what a message is, who wrote it, and which ids it calls and answers.

Messages arrive in several shapes and every part of the module has to agree on them:

* Amplifier orchestrators: ``tool_calls: [{"id", "tool", "arguments": {...}}]`` plus a content
  list of ``thinking`` / ``text`` / ``tool_call`` blocks; results are role ``tool`` with
  ``tool_call_id``.
* OpenAI chat data: ``tool_calls: [{"id", "type": "function", "function": {...}}]`` and
  ``content: None`` on call-only turns.
* Anthropic data: ``tool_use`` blocks on the assistant, ``tool_result`` blocks (with
  ``tool_use_id``) on the answering message.

Content blocks may be plain dicts or the host's typed block objects (anything with
``model_dump()``); both are read through :func:`block_dict`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

# Exports the message vocabulary: roles, block types, view-marker keys, and the readers.
__all__ = [
    "CALL_BLOCK_TYPES",
    "COUNTED_CALL_BLOCK_TYPES",
    "IMAGE_BLOCK_TYPES",
    "LOADED_TOOLS_KEY",
    "MAX_DEPTH",
    "NON_HUMAN_SOURCES",
    "OPENAI_IMAGE_BLOCK_TYPES",
    "ORIGINAL_LENGTH_KEY",
    "ORIGINAL_TOKENS_KEY",
    "REPAIRED_KEY",
    "RESULT_BLOCK_ROLES",
    "RESULT_BLOCK_TYPES",
    "RESULT_ROLES",
    "ROLES",
    "SIGNED_THINKING_TYPES",
    "STUBBED_KEY",
    "TEXT_BLOCK_TYPES",
    "THINKING_BLOCK_TYPES",
    "TRUNCATED_KEY",
    "Message",
    "block_dict",
    "blocks",
    "call_ids",
    "carries_loaded_tools",
    "describe",
    "has_image",
    "has_thinking",
    "is_human_prompt",
    "is_mapping",
    "is_tool_result",
    "metadata",
    "produced",
    "read_block",
    "result_ids",
    "thinking_blocks",
    "validate_envelope",
    "validate_message",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "function", "tool"})
RESULT_ROLES = frozenset({"tool", "function"})
"""Roles whose message answers a call by its own ``tool_call_id``."""
RESULT_BLOCK_ROLES = RESULT_ROLES | {"user"}
"""Roles whose message may answer calls with ``tool_result`` blocks."""
CALL_BLOCK_TYPES = frozenset({"tool_call", "tool_use"})
"""Call blocks that pair with results by their ``id``."""
COUNTED_CALL_BLOCK_TYPES = CALL_BLOCK_TYPES | {"function_call"}
"""Blocks the estimator prices as calls: also the Responses ``function_call`` (never paired)."""
RESULT_BLOCK_TYPES = frozenset({"tool_result"})
TEXT_BLOCK_TYPES = frozenset(
    {"text", "input_text", "output_text", "summary_text", "reasoning_text"}
)
SIGNED_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
"""The provider's thinking blocks: those of the latest assistant turn must be sent unchanged."""
THINKING_BLOCK_TYPES = SIGNED_THINKING_TYPES | {"reasoning"}
"""Every block of model reasoning, the Responses ``reasoning`` item included."""
OPENAI_IMAGE_BLOCK_TYPES = frozenset({"image_url", "input_image"})
"""Images in OpenAI chat (``image_url``) and Responses (``input_image``) form."""
IMAGE_BLOCK_TYPES = OPENAI_IMAGE_BLOCK_TYPES | {"image"}
NON_HUMAN_SOURCES = frozenset({"hook", "context-compaction"})
MAX_DEPTH = 32
"""Hostile nesting: what is read below this many levels is walked flat or cut, never recursed."""
LOADED_TOOLS_KEY = "openai:tool_search_items"
# The keys a view adds to a message it changed, so readers can tell what the view did to it.
TRUNCATED_KEY = "_truncated"
"""On a tool result the view shortened; ``ORIGINAL_TOKENS_KEY`` holds its estimate before."""
ORIGINAL_TOKENS_KEY = "_original_tokens"
STUBBED_KEY = "_stubbed"
"""On a user message the view replaced by a stub; ``ORIGINAL_LENGTH_KEY`` holds its length."""
ORIGINAL_LENGTH_KEY = "_original_length"
REPAIRED_KEY = "_repaired"
"""On a placeholder result the view added for a call that never got one."""

Message = dict[str, Any]


def describe(message: object, index: int | None = None) -> str:
    """A short label for error messages: position and role, never the content."""
    where = f"message #{index}" if index is not None else "message"
    if isinstance(message, Mapping):
        return f"{where} (role={message.get('role')!r})"
    return f"{where} ({type(message).__name__})"


def validate_message(message: object, index: int | None = None) -> None:
    """Reject a structurally broken message before anything is stored.

    Raises ``TypeError`` when the message is not a mapping, ``ValueError`` for a bad field.
    Messages that are well formed but do not pair up (an unknown ``tool_call_id``) pass:
    rejecting them would lose a real tool result.
    """
    # The label is only spelled out for an error (a resume validates every message).
    label = _Label(message, index)
    message = _checked_envelope(message, label)
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ValueError(
            f"{label}: 'content' must be a string, a list of blocks or None, "
            f"got {type(content).__name__}"
        )
    if isinstance(content, list):
        # Blocks are not judged here: an unknown or malformed block is stored as it came (a
        # tool result must never be refused) and the view sends its host-valid projection.
        for position, block in enumerate(content):
            if type(block) is not dict:  # only a typed block's model_dump() can fail
                read_block(block, f"{label}: content block {position}")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            raise ValueError(
                f"{label}: 'tool_calls' must be a list, got {type(tool_calls).__name__}"
            )
        for position, call in enumerate(tool_calls):
            if not is_mapping(call):
                raise ValueError(f"{label}: tool_calls[{position}] must be a dict")
    metadata = message.get("metadata")
    if metadata is not None:
        if not is_mapping(metadata):
            raise ValueError(f"{label}: 'metadata' must be a dict, got {type(metadata).__name__}")
        bad = next((k for k in metadata if not isinstance(k, str)), None)
        if bad is not None:
            raise ValueError(
                f"{label}: 'metadata' keys must be strings, got {type(bad).__name__} {bad!r:.40}"
            )
    for key in ("tool_call_id", "name"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{label}: {key!r} must be a string, got {type(value).__name__}")


def validate_envelope(message: object, index: int | None = None) -> None:
    """Reject what no provider takes as a message whatever its content: not a mapping, or a
    role missing or unknown. A message that reached the history without admission (written
    straight into a manager's list) is checked so before it is indexed: its content the view
    repairs, but a message with no role it could only send as it is, and have refused."""
    _checked_envelope(message, _Label(message, index))


def _checked_envelope(message: object, label: _Label) -> Mapping[str, Any]:
    if not is_mapping(message):
        raise TypeError(f"{label}: a message must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise ValueError(f"{label}: the 'role' key is missing")
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"{label}: 'role' must be one of {', '.join(sorted(ROLES))}")
    return message


class _Label:
    """``describe(message, index)``, spelled out only when an error message formats it."""

    __slots__ = ("index", "message")

    def __init__(self, message: object, index: int | None) -> None:
        self.message = message
        self.index = index

    def __str__(self) -> str:
        return describe(self.message, self.index)


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, answered for a dict without the ABC machinery (which
    costs several times more, and a resume asks it of every message and block)."""
    return type(value) is dict or isinstance(value, Mapping)


def read_block(block: object, label: str) -> Mapping[str, Any] | None:
    """``block_dict`` whose failure (a typed block whose ``model_dump()`` raises) is a
    ``ValueError`` naming where the block is, not the raw exception."""
    try:
        return block_dict(block)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from exc


def block_dict(block: object) -> Mapping[str, Any] | None:
    """Read a content block as a mapping, whether it is a dict or a typed host object."""
    if is_mapping(block):
        return block  # type: ignore[return-value]
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        try:
            data = dump()
        except Exception as exc:
            # Named by the caller (``read_block``, the history index): never the raw error.
            raise ValueError(
                f"model_dump() of a typed content block failed: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(data, Mapping):
            return data  # type: ignore[return-value]
    return None


def blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The message's content blocks as mappings (empty for string content)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    result: list[Mapping[str, Any]] = []
    for block in content:
        data = block_dict(block)
        if data is not None:
            result.append(data)
    return result


def metadata(message: Mapping[str, Any]) -> Mapping[str, Any]:
    value = message.get("metadata")
    return value if is_mapping(value) else {}  # type: ignore[return-value]


def _unique(ids: Iterable[object]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in ids:
        if isinstance(value, str) and value:
            seen.setdefault(value, None)
    return tuple(seen)


def call_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    """Tool-call ids an assistant message declares, in order, without duplicates."""
    if message.get("role") != "assistant":
        return ()
    found: list[object] = []
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if isinstance(call, Mapping):
                found.append(call.get("id") or call.get("tool_call_id"))
    for block in blocks(message):
        if block.get("type") in CALL_BLOCK_TYPES:
            found.append(block.get("id"))
    return _unique(found)


def result_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    """Tool-call ids this message answers (a ``tool`` message or ``tool_result`` blocks)."""
    role = message.get("role")
    found: list[object] = []
    if role in RESULT_ROLES:
        found.append(message.get("tool_call_id") or message.get("tool_use_id"))
    if role in RESULT_BLOCK_ROLES:
        for block in blocks(message):
            if block.get("type") in RESULT_BLOCK_TYPES:
                found.append(block.get("tool_use_id") or block.get("tool_call_id"))
    return _unique(found)


def is_human_prompt(message: Mapping[str, Any]) -> bool:
    """True for input a person typed: role ``user`` that no hook or compaction produced.

    A user-role message that only carries tool results is not a prompt either.
    """
    if message.get("role") != "user":
        return False
    if produced(metadata(message)):
        return False
    return not result_ids(message)


def produced(meta: Mapping[str, Any]) -> bool:
    """The metadata of a user-role message says a hook or compaction produced it (``ephemeral``,
    or a ``source`` among ``NON_HUMAN_SOURCES``; any other source, of any type, names none)."""
    source = meta.get("source")
    return meta.get("ephemeral") is True or (
        isinstance(source, str) and source in NON_HUMAN_SOURCES
    )


def is_tool_result(message: Mapping[str, Any]) -> bool:
    """A ``tool`` message, or any message that answers a call with result blocks."""
    return message.get("role") == "tool" or bool(result_ids(message))


def has_thinking(message: Mapping[str, Any]) -> bool:
    if message.get("reasoning_content"):
        return True
    return any(block.get("type") in THINKING_BLOCK_TYPES for block in blocks(message))


def thinking_blocks(message: Mapping[str, Any]) -> int:
    """How many thinking blocks ``message`` carries (a ``reasoning_content`` text is one)."""
    count = 1 if message.get("reasoning_content") else 0
    return count + sum(1 for block in blocks(message) if block.get("type") in THINKING_BLOCK_TYPES)


def has_image(message: Mapping[str, Any]) -> bool:
    """Whether any block (or a block nested in a tool result) carries an image."""
    for block in blocks(message):
        if block.get("type") in IMAGE_BLOCK_TYPES:
            return True
        inner = block.get("content")
        if isinstance(inner, list) and any(
            isinstance(b, Mapping) and b.get("type") in IMAGE_BLOCK_TYPES  # type: ignore[union-attr]
            for b in inner  # type: ignore[union-attr]
        ):
            return True
    return False


def carries_loaded_tools(message: Mapping[str, Any]) -> bool:
    return LOADED_TOOLS_KEY in metadata(message)
