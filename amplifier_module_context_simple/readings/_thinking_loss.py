"""What a provider reports of the reasoning a prefix edit cost (Anthropic's bound thinking).

A model whose thinking blocks are bound to the prompt they were produced against drops every
block after an edit. Amplifier's Anthropic provider says so: it retries a refused request once
with the API dropping unbound blocks (``provider:thinking_binding_retry``) and, from then on,
reports each response whose request lost blocks (``provider:thinking_blocks_dropped``, with
the count). The module counts both, so ``token_meter_stats`` shows what its edits cost.
"""

from __future__ import annotations

__all__ = [
    "THINKING_BINDING_RETRY",
    "THINKING_BLOCKS_DROPPED",
    "THINKING_HOOK_NAME",
    "ThinkingLoss",
]

from collections.abc import Mapping
from typing import Any

from ..vocabulary._numbers import is_int
from ._meter import continue_result

THINKING_BLOCKS_DROPPED = "provider:thinking_blocks_dropped"
THINKING_BINDING_RETRY = "provider:thinking_binding_retry"
THINKING_HOOK_NAME = "context-simple-thinking"

_COUNT_KEYS = ("count", "dropped", "blocks_dropped", "dropped_blocks")
"""Where a drop event may carry its count of blocks (the first integer found wins)."""


class ThinkingLoss:
    """Counts of the provider's thinking-binding events over the session."""

    def __init__(self) -> None:
        self.blocks_dropped = 0
        """Thinking blocks the provider reported dropped, summed over its events."""
        self.drop_events = 0
        """Responses whose request lost thinking blocks."""
        self.binding_retries = 0
        """Requests the provider had to retry because their thinking no longer matched."""

    def stats(self) -> dict[str, int]:
        return {
            "thinking_blocks_dropped": self.blocks_dropped,
            "thinking_drop_events": self.drop_events,
            "thinking_binding_retries": self.binding_retries,
        }

    async def on_event(self, event: str, data: Any) -> Any:
        """Hook handler for both provider events; never raises, always continues."""
        if event == THINKING_BINDING_RETRY:
            self.binding_retries += 1
        elif event == THINKING_BLOCKS_DROPPED:
            self.drop_events += 1
            self.blocks_dropped += _count(data)
        return continue_result()


def _count(data: Any) -> int:
    """The blocks a drop event names (1 when it names no count: one block at least was lost)."""
    if isinstance(data, Mapping):
        for key in _COUNT_KEYS:
            value = data.get(key)  # pyright: ignore[reportUnknownMemberType]
            if is_int(value) and value >= 0:
                return value
    return 1
