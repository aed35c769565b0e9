"""Event names and the one way this module emits them.

Event names and payload keys are interface: hooks, dashboards and session records match on
them literally. Emission never fails a request: a hook registry that raises is logged.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import Any

# Exports the event names and the one routine that emits them.
__all__ = [
    "BUDGET",
    "COMPACTION",
    "EVENTS",
    "INGRESS_TRUNCATED",
    "POST_COMPACT",
    "PRE_COMPACT",
    "READING_REJECTED",
    "safe_emit",
    "safe_emit_each",
]

logger = logging.getLogger(__name__)

BUDGET = "context:budget"
COMPACTION = "context:compaction"
PRE_COMPACT = "context:pre_compact"
POST_COMPACT = "context:post_compact"
INGRESS_TRUNCATED = "context:tool_result_ingress_truncated"
READING_REJECTED = "context:reading_rejected"
"""A provider reading far above what its request carried was not believed (``_reading_gate``)."""

EVENTS: tuple[str, ...] = (
    BUDGET,
    COMPACTION,
    PRE_COMPACT,
    POST_COMPACT,
    INGRESS_TRUNCATED,
    READING_REJECTED,
)
"""Every event this module emits, declared to the host's observability channel."""


async def safe_emit(hooks: object | None, event: str, payload: Mapping[str, Any]) -> bool:
    """Emit ``event`` if a registry is present; return whether it was handed over.

    The payload is copied so a handler that mutates it cannot reach our state.
    """
    emit = getattr(hooks, "emit", None)
    if not callable(emit):
        return False
    try:
        result = emit(event, dict(payload))
        if inspect.isawaitable(result):
            await result
    except Exception:  # a broken hook must never fail the request
        logger.warning("context-simple: emitting %s failed", event, exc_info=True)
        return False
    return True


async def safe_emit_each(
    hooks: object | None, event: str, payloads: Iterable[Mapping[str, Any]]
) -> None:
    """``safe_emit`` each payload in turn."""
    for payload in payloads:
        await safe_emit(hooks, event, payload)
