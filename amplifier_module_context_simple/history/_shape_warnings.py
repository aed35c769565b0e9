"""Stored shapes that a provider will not read as meant, said once per manager at admission.

Two shapes pass admission (they are well formed) and then do something the caller did not
ask for: a tool call in OpenAI's shape (``{"type": "function", "function": {...}}``) reaches
Amplifier's providers without a name or arguments, since they read ``{"id", "tool",
"arguments"}``; and a ``tool`` message without a ``tool_call_id`` answers no call, so every
view leaves it out. Each kind is logged once (a session stores thousands of such messages).
"""

from __future__ import annotations

__all__ = ["OPENAI_CALL", "RESULT_WITHOUT_ID", "ShapeWarnings"]

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..vocabulary._messages import RESULT_ROLES, is_mapping, result_ids

logger = logging.getLogger(__name__)

OPENAI_CALL = "openai_call"
RESULT_WITHOUT_ID = "result_without_id"
_KINDS = frozenset({OPENAI_CALL, RESULT_WITHOUT_ID})


class ShapeWarnings:
    """The kinds already warned about; checks stop once every kind has been."""

    def __init__(self) -> None:
        self.warned: set[str] = set()

    def check_all(self, messages: Iterable[Mapping[str, Any]]) -> None:
        for index, message in enumerate(messages):
            if len(self.warned) == len(_KINDS):
                return
            self.check(message, index)

    def check(self, message: Mapping[str, Any], index: int) -> None:
        if len(self.warned) == len(_KINDS):
            return
        role = message.get("role")
        if role == "assistant" and OPENAI_CALL not in self.warned:
            calls = message.get("tool_calls")
            if isinstance(calls, list) and any(_openai_shaped(c) for c in calls):  # pyright: ignore[reportUnknownVariableType]
                self.warned.add(OPENAI_CALL)
                logger.warning(
                    "context-simple: message %d stores a tool call in OpenAI's shape "
                    '({"type": "function", "function": {...}}); Amplifier\'s providers read '
                    '{"id", "tool", "arguments": {...}} and send it without a name or '
                    "arguments: store calls in that shape (said once)",
                    index,
                )
        elif (
            role in RESULT_ROLES
            and RESULT_WITHOUT_ID not in self.warned
            and not result_ids(message)
        ):
            self.warned.add(RESULT_WITHOUT_ID)
            logger.warning(
                "context-simple: message %d is a %r message without a tool_call_id: it "
                "answers no call, so every view leaves it out (said once)",
                index,
                role,
            )


def _openai_shaped(call: object) -> bool:
    """A call whose name is only inside ``function`` (no ``tool`` or ``name`` of its own)."""
    return (
        is_mapping(call)
        and is_mapping(call.get("function"))
        and call.get("tool") is None  # pyright: ignore[reportUnknownMemberType]
        and call.get("name") is None  # pyright: ignore[reportUnknownMemberType]
    )
