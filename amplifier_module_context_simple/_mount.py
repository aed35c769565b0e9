"""``mount``: validate the config, build the manager, and plug it into a coordinator.

The host calls ``mount`` twice per session (once against a validation stand-in, once for real),
so everything it does is undone by the cleanup it returns, and it copes with coordinators that
lack hooks or capability registration.
"""

from __future__ import annotations

__all__ = [
    "CAP_FOREGROUND_USAGE",
    "CAP_MEASURED_VIEW",
    "CAP_REQUEST_RETENTION",
    "CONTRIBUTOR_NAME",
    "MOUNT_POINT",
    "mount",
]

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from ._manager import SimpleContextManager
from .planning._config import ContextConfig
from .readings._meter import METER_EVENT, METER_HOOK_NAME, METER_HOOK_PRIORITY
from .readings._thinking_loss import (
    THINKING_BINDING_RETRY,
    THINKING_BLOCKS_DROPPED,
    THINKING_HOOK_NAME,
)
from .vocabulary._events import EVENTS

logger = logging.getLogger(__name__)

MOUNT_POINT = "context"
CAP_REQUEST_RETENTION = "context.request_retention"
CAP_MEASURED_VIEW = "context.measured_request_view"
CAP_FOREGROUND_USAGE = "context.foreground_usage"
CONTRIBUTOR_NAME = "context-simple"


async def mount(
    coordinator: Any, config: Mapping[str, Any] | None = None
) -> Callable[[], Awaitable[None]]:
    """Mount a :class:`SimpleContextManager` at ``"context"``; returns an async cleanup."""
    settings = ContextConfig.from_mapping(config)
    hooks = getattr(coordinator, "hooks", None)
    manager = SimpleContextManager(**asdict(settings), hooks=hooks)
    get = getattr(coordinator, "get", None)
    if callable(get):
        # The orchestrators send every mounted tool with every request: the budget holds
        # their definitions back, re-estimated only when the mounted set changes.
        manager.set_tool_definitions(lambda: get("tools"))
    await coordinator.mount(MOUNT_POINT, manager, name="context-simple")

    undo: list[Callable[[], object]] = []
    register = getattr(hooks, "register", None)
    if callable(register):
        unregister = register(
            METER_EVENT,
            manager.meter.on_llm_response,
            priority=METER_HOOK_PRIORITY,
            name=METER_HOOK_NAME,
        )
        if callable(unregister):
            undo.append(unregister)
        for event in (THINKING_BLOCKS_DROPPED, THINKING_BINDING_RETRY):
            unregister = register(
                event, manager.thinking_loss.on_event, name=f"{THINKING_HOOK_NAME}-{event}"
            )
            if callable(unregister):
                undo.append(unregister)
    _register_capabilities(coordinator, manager)
    contribute = getattr(coordinator, "register_contributor", None)
    if callable(contribute):
        contribute("observability.events", CONTRIBUTOR_NAME, lambda: list(EVENTS))

    async def cleanup() -> None:
        for step in reversed(undo):
            try:
                result = step()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # cleanup must not fail session teardown
                logger.debug("context-simple: cleanup step failed", exc_info=True)
        undo.clear()

    return cleanup


def _register_capabilities(coordinator: Any, manager: SimpleContextManager) -> None:
    register = getattr(coordinator, "register_capability", None)
    if not callable(register):
        return
    register(CAP_FOREGROUND_USAGE, manager.claim_foreground_usage)
    register(CAP_REQUEST_RETENTION, manager.get_messages_for_request_retaining)
    if manager.token_meter == "actual":
        register(CAP_MEASURED_VIEW, manager.get_measured_request_view)
