"""The counts of the provider's thinking-binding events (``token_meter_stats``' thinking keys)."""

from __future__ import annotations

from typing import Any

import pytest

from amplifier_module_context_simple.readings._thinking_loss import (
    THINKING_BINDING_RETRY,
    THINKING_BLOCKS_DROPPED,
    ThinkingLoss,
)


async def _after(*events: tuple[str, Any]) -> dict[str, int]:
    loss = ThinkingLoss()
    for event, data in events:
        await loss.on_event(event, data)
    return loss.stats()


async def test_every_retry_is_counted() -> None:
    stats = await _after((THINKING_BINDING_RETRY, {}), (THINKING_BINDING_RETRY, {}))
    assert stats["thinking_binding_retries"] == 2


@pytest.mark.parametrize(
    ("data", "blocks"),
    [
        ({"count": 0}, 0),  # a response that lost nothing adds no block, but is an event
        ({"dropped": 4}, 4),  # a later key is read when the first is missing
        ({}, 1),  # no count: at least one block was lost
        ({"count": "3"}, 1),
        ({"count": -2}, 1),
        (None, 1),
    ],
    ids=["zero", "other-key", "no-count", "text-count", "negative", "no-payload"],
)
async def test_a_drop_event_adds_the_blocks_it_names(data: Any, blocks: int) -> None:
    stats = await _after((THINKING_BLOCKS_DROPPED, data))
    assert stats["thinking_blocks_dropped"] == blocks
    assert stats["thinking_drop_events"] == 1
