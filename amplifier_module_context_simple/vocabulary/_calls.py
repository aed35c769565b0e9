"""What an assistant message's calls say: each call's id, tool and arguments, in any shape.

The vocabulary (``_messages``) knows calls by their ids; the map of what a view left out and
the replay tool also need the tool's name and its arguments, read here once for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._messages import CALL_BLOCK_TYPES, blocks

__all__ = ["calls_made"]


def calls_made(message: Mapping[str, Any]) -> list[tuple[str, str, object]]:
    """(call id, tool name, arguments as stored) for every call the message makes, each once.

    Amplifier stores a call twice, as a ``tool_calls`` entry and as a ``tool_call`` content
    block with the same id; a block whose id a ``tool_calls`` entry already has is that call.
    Both call shapes are read (``tool``/``name`` and ``arguments``, or OpenAI's ``function``).
    """
    found: list[tuple[str, str, object]] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping):
            function = call.get("function")
            name = call.get("tool") or call.get("name")
            arguments = call.get("arguments")
            if isinstance(function, Mapping):
                name = name or function.get("name")
                arguments = arguments or function.get("arguments")
            call_id = str(call.get("id") or call.get("tool_call_id") or "")
            found.append((call_id, str(name), arguments))
    listed = {call_id for call_id, _, _ in found if call_id}
    for block in blocks(message):
        if block.get("type") in CALL_BLOCK_TYPES:
            call_id = str(block.get("id") or "")
            if not call_id or call_id not in listed:
                arguments = block.get("input", block.get("arguments"))
                found.append((call_id, str(block.get("name")), arguments))
    return found
