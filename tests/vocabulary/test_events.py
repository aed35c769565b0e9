"""How this module emits its events (vocabulary/_events.py): through the host's hook registry,
a copy of the payload each time, and never failing a request when a registry breaks."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from amplifier_core import HookRegistry, HookResult

from amplifier_module_context_simple.vocabulary._events import BUDGET, safe_emit, safe_emit_each


def _recording(event: str) -> tuple[HookRegistry, list[dict[str, Any]]]:
    hooks, seen = HookRegistry(), []

    async def record(name: str, data: dict[str, Any]) -> HookResult:
        seen.append(data)
        data["touched"] = True  # a handler that mutates what it is handed
        return HookResult(action="continue")

    hooks.register(event, record, name="record")
    return hooks, seen


async def test_an_event_reaches_the_registry_as_a_copy() -> None:
    hooks, seen = _recording(BUDGET)
    payload = {"source": "context_window"}
    assert await safe_emit(hooks, BUDGET, payload) is True
    assert [s["source"] for s in seen] == ["context_window"]
    assert payload == {"source": "context_window"}, "the handler's change stays its own"


async def test_each_payload_is_emitted_in_turn() -> None:
    hooks, seen = _recording(BUDGET)
    await safe_emit_each(hooks, BUDGET, [{"n": 1}, {"n": 2}, {"n": 3}])
    assert [s["n"] for s in seen] == [1, 2, 3]


async def test_without_a_registry_nothing_is_emitted() -> None:
    assert await safe_emit(None, BUDGET, {}) is False
    assert await safe_emit(object(), BUDGET, {}) is False


class _BrokenRegistry:
    """A registry whose emit raises: what a broken host or plugin hands the module."""

    def __init__(self, *, awaitable: bool) -> None:
        self.awaitable = awaitable

    def emit(self, event: str, data: dict[str, Any]) -> Any:
        if not self.awaitable:
            raise RuntimeError("registry down")

        async def fail() -> None:
            raise RuntimeError("handler down")

        return fail()


@pytest.mark.parametrize("awaitable", [False, True], ids=["emit raises", "its awaitable raises"])
async def test_a_broken_registry_is_logged_and_the_request_goes_on(
    awaitable: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert await safe_emit(_BrokenRegistry(awaitable=awaitable), BUDGET, {}) is False
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == f"context-simple: emitting {BUDGET} failed"
    assert record.exc_info and record.exc_info[0] is RuntimeError, "the cause is logged with it"


class _SyncRegistry:
    """A registry whose emit is a plain function: its result is not awaited."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self.seen.append(event)


async def test_a_registry_with_a_plain_emit_is_called_once() -> None:
    registry = _SyncRegistry()
    assert await safe_emit(registry, BUDGET, {}) is True
    assert registry.seen == [BUDGET]
