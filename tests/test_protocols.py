"""Orchestrator protocols: request retention, hard fit, the measured-request view, rollback.

A reference orchestrator double speaks both protocols the way a real loop would: it counts a
request as our view's estimate plus a fixed tools overhead, can refuse to measure, and can be
cancelled at any await.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.testing import MockCoordinator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
    mount,
)
from amplifier_module_context_simple.views._render import NOTICE_SOURCE

from .conftest import Recorder

TOOLS_OVERHEAD = 300
REMINDER = '<system-reminder source="hooks-todo">Keep the todo list current.</system-reminder>'
BIG = "compiler output line that keeps going\n" * 100


class CancelAt(Recorder):
    """Hooks that raise CancelledError on the emit of one named event."""

    def __init__(self, event: str | None = None) -> None:
        super().__init__()
        self.event = event

    async def emit(self, event: str, data: dict) -> None:
        if event == self.event:
            self.event = None
            raise asyncio.CancelledError
        await super().emit(event, data)


class Provider:
    """Publishes a window; its async info call can be told to cancel."""

    def __init__(self, window: int = 40_000, output: int = 4_000, cancel: bool = False) -> None:
        self.window, self.output, self.cancel = window, output, cancel

    async def get_model_info(self) -> dict[str, int]:
        if self.cancel:
            raise asyncio.CancelledError
        return {"context_window": self.window, "max_output_tokens": self.output}


class RefOrchestrator:
    """Counts requests like an orchestrator that owns tools and overlays."""

    def __init__(
        self,
        manager: SimpleContextManager,
        *,
        limit: int = 10**9,
        measure: bool = True,
        cancel_on_call: int | None = None,
    ) -> None:
        self.manager, self.limit, self.measure = manager, limit, measure
        self.cancel_on_call = cancel_on_call
        self.counted: list[list[dict[str, Any]]] = []

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.counted.append(view)
        if self.cancel_on_call == len(self.counted):
            raise asyncio.CancelledError
        tokens = self.manager._estimate_tokens(view) + TOOLS_OVERHEAD
        measurement = (
            {"kind": "provider_count", "source": "ref-count", "input_tokens": tokens}
            if self.measure
            else None
        )
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": self.limit,
                "measurement": measurement,
            },
        }


def state_of(manager: SimpleContextManager) -> tuple[Any, ...]:
    return (
        manager.decisions,
        manager.compaction_stats,
        manager.token_meter_stats,
        manager.meter.snapshot(),
        copy.deepcopy(manager.messages),
    )


async def session(manager: SimpleContextManager, turns: int = 24) -> None:
    await manager.add_message({"role": "user", "content": "Refactor the parser."})
    await manager.add_message(
        {"role": "user", "content": REMINDER, "metadata": {"ephemeral": True, "persisted": True}}
    )
    for t in range(turns):
        await manager.add_message(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{t}", "tool": "bash", "arguments": {}}],
            }
        )
        await manager.add_message({"role": "tool", "tool_call_id": f"c{t}", "content": BIG})


# --- request retention ----------------------------------------------------------------------


async def test_retained_reminder_survives_compaction_that_removes_its_neighbours() -> None:
    manager = SimpleContextManager(max_tokens=8_000)
    await session(manager)
    plain = await manager.get_messages_for_request()
    assert all(m.get("content") != REMINDER for m in plain), "ordinary compaction drops it"
    kept = await manager.get_messages_for_request_retaining(retain_contents=[REMINDER])
    assert sum(m.get("content") == REMINDER for m in kept) == 1
    assert check_view(kept, history=manager.messages) == []
    again = await manager.get_messages_for_request()
    assert all(m.get("content") != REMINDER for m in again), "retention lasts one call"


async def test_unknown_body_is_a_value_error_and_quoting_in_a_prompt_does_not_count() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "<system-reminder>x</system-reminder>"})
    with pytest.raises(ValueError, match="never admitted"):
        await manager.get_messages_for_request_retaining(
            retain_contents=["<system-reminder>x</system-reminder>"]
        )


async def test_required_set_that_cannot_fit_fails_closed_without_state_change() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=3_000, hooks=recorder)
    await manager.add_message({"role": "user", "content": "word " * 5_000})
    before = state_of(manager)
    with pytest.raises(ContextLengthError, match="shorten"):
        await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert state_of(manager) == before
    assert recorder.named("context:compaction") == []
    assert recorder.named("context:budget") == []


async def test_hard_fit_targets_the_budget_itself_and_sticks() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=8_000, hooks=recorder)
    await session(manager, turns=12)
    view = await manager.get_messages_for_request_retaining(
        retain_contents=[REMINDER], token_budget=6_000, hard_fit=True
    )
    [event] = recorder.named("context:compaction")
    [reminder] = [m for m in view if (m.get("metadata") or {}).get("source") == NOTICE_SOURCE]
    # The target is the budget less what the notice can take: the notice must fit too.
    assert 6_000 - 800 < event["target_tokens"] <= 6_000 - estimate_message_tokens(reminder)
    assert manager._estimate_tokens(view) <= 6_000
    later = await manager.get_messages_for_request(6_000)
    if len(recorder.named("context:compaction")) == 1:
        assert later == view, "an ordinary request reuses the hard-fit reduction"


@pytest.mark.parametrize("where", ["provider", "factory", "context:pre_compact"])
async def test_cancellation_before_delivery_restores_everything(where: str) -> None:
    hooks = CancelAt(where if where.startswith("context:") else None)
    manager = SimpleContextManager(max_tokens=8_000, hooks=hooks)
    await session(manager)
    if where == "factory":

        async def factory() -> str:
            raise asyncio.CancelledError

        await manager.set_system_prompt_factory(factory)
    before = state_of(manager)
    with pytest.raises(asyncio.CancelledError):
        await manager.get_messages_for_request_retaining(
            retain_contents=[REMINDER], provider=Provider(cancel=where == "provider"), hard_fit=True
        )
    assert state_of(manager) == before
    assert hooks.named("context:compaction") == []


async def test_cancellation_after_delivery_started_keeps_the_compaction_once() -> None:
    hooks = CancelAt("context:post_compact")
    manager = SimpleContextManager(max_tokens=8_000, hooks=hooks)
    await session(manager)
    with pytest.raises(asyncio.CancelledError):
        await manager.get_messages_for_request_retaining(retain_contents=[REMINDER])
    assert len(hooks.named("context:compaction")) == 1
    level = manager.compaction_level
    assert level > 0
    await manager.get_messages_for_request()
    assert len(hooks.named("context:compaction")) == 1, "the reduced view is reused"
    assert manager.compaction_level == level


# --- measured-request view ------------------------------------------------------------------


async def measured_manager(**config: Any) -> tuple[SimpleContextManager, Recorder]:
    recorder = Recorder()
    manager = SimpleContextManager(token_meter="actual", hooks=recorder, **config)
    await session(manager)
    return manager, recorder


async def test_measured_view_needs_actual_meter() -> None:
    manager = SimpleContextManager()
    with pytest.raises(RuntimeError, match="token_meter='actual'"):
        await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=RefOrchestrator(manager).count_view
        )


async def test_measured_not_needed_returns_the_counted_objects() -> None:
    manager, _ = await measured_manager(max_tokens=1_000_000)
    ref = RefOrchestrator(manager)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[REMINDER], count_view=ref.count_view
    )
    assert result["outcome"] == "not_needed"
    assert result["count_calls"] == 1
    assert result["base_view"] is ref.counted[0]
    assert result["final_attempt"]["dispatch"]["messages"] is ref.counted[0]
    assert await result["transaction"].commit() is True


async def test_measured_target_reached_commits_and_emits_with_outcome() -> None:
    manager, recorder = await measured_manager(max_tokens=16_000)
    ref = RefOrchestrator(manager)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[REMINDER], count_view=ref.count_view
    )
    assert result["outcome"] == "target_reached"
    assert 2 <= result["count_calls"] <= 9
    assert result["measured_after"] <= result["target"] < result["measured_before"]
    assert result["base_view"] is ref.counted[-1]
    assert any(m.get("content") == REMINDER for m in result["base_view"])
    assert recorder.named("context:compaction") == [], "staged until commit"
    before = manager.decisions
    assert await result["transaction"].commit() is True
    assert manager.decisions is not before
    [event] = recorder.named("context:compaction")
    assert event["outcome"] == "target_reached"
    assert event["measurement_source"] == "ref-count"
    assert event["count_calls"] == result["count_calls"]
    assert await result["transaction"].commit() is True, "a second commit repeats its answer"


async def test_measured_protected_floor_is_not_called_success() -> None:
    manager, _ = await measured_manager(
        max_tokens=12_000, protected_recent=1.0, protected_tool_results=50
    )
    ref = RefOrchestrator(manager)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=ref.count_view
    )
    assert result["outcome"] == "protected_floor"
    assert result["measured_after"] > result["target"]


async def test_measured_over_hard_limit_fails_closed_or_uses_output_relief() -> None:
    manager, recorder = await measured_manager(
        max_tokens=12_000, protected_recent=1.0, protected_tool_results=50
    )
    before = state_of(manager)
    ref = RefOrchestrator(manager, limit=5_000)
    with pytest.raises(ContextLengthError):
        await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=ref.count_view
        )
    assert state_of(manager) == before

    seen: list[tuple[Any, Any]] = []

    async def fit_output(view: list[dict[str, Any]], attempt: Mapping[str, Any]) -> dict[str, Any]:
        seen.append((view, attempt))
        return {
            "dispatch": {"messages": view, "max_output_tokens": 1_000},
            "budget_decision": {
                "estimated_input_tokens": 4_900,
                "input_limit_tokens": 5_000,
                "measurement": {
                    "kind": "provider_count",
                    "source": "ref-count",
                    "input_tokens": 4_900,
                },
            },
            "count_calls": 2,
        }

    ref = RefOrchestrator(manager, limit=5_000)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=ref.count_view, fit_output=fit_output
    )
    assert result["outcome"] == "reduced_output"
    assert seen[0][0] is ref.counted[-1]
    assert result["count_calls"] == len(ref.counted) + 2
    assert recorder.named("context:compaction") == []

    async def no_relief(view: list[dict[str, Any]], attempt: Mapping[str, Any]) -> None:
        return None

    with pytest.raises(ContextLengthError):
        await manager.get_measured_request_view(
            provider=None,
            retain_contents=[],
            count_view=RefOrchestrator(manager, limit=5_000).count_view,
            fit_output=no_relief,
        )


async def test_measured_without_measurement_falls_back_to_the_estimate() -> None:
    manager, _ = await measured_manager(max_tokens=12_000)
    ref = RefOrchestrator(manager, measure=False)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=ref.count_view
    )
    assert result["outcome"] == "measurement_unavailable"
    assert result["measured_before"] is None
    assert result["base_view"] is ref.counted[-1]
    assert check_view(result["base_view"]) == []


@pytest.mark.parametrize(
    "envelope",
    [
        None,
        {"budget_decision": None},
        {"dispatch": 1},
        {"dispatch": 1, "budget_decision": []},
        {"dispatch": 1, "budget_decision": {"estimated_input_tokens": 1}},
        # A measurement that is not a mapping is an unusable one, not an error (issue 21 §5:
        # tests/views/test_hostile_sessions.py, a measurement that is not a mapping).
    ],
)
async def test_malformed_envelopes_are_type_errors(envelope: Any) -> None:
    manager, _ = await measured_manager()

    async def count_view(view: list[dict[str, Any]]) -> Any:
        return envelope

    with pytest.raises(TypeError):
        await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=count_view
        )


async def test_rollback_is_idempotent_and_terminal() -> None:
    manager, recorder = await measured_manager(max_tokens=12_000)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=RefOrchestrator(manager).count_view
    )
    before = manager.decisions
    transaction = result["transaction"]
    transaction.rollback()
    transaction.rollback()
    assert await transaction.commit() is False
    assert manager.decisions is before
    assert recorder.named("context:compaction") == []


async def test_commit_when_cancelled_rolls_back() -> None:
    manager, recorder = await measured_manager(max_tokens=12_000)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=RefOrchestrator(manager).count_view
    )
    assert await result["transaction"].commit(is_cancelled=lambda: True) is False
    assert recorder.named("context:compaction") == []
    assert manager.compaction_level == 0


@pytest.mark.parametrize("call", [1, 2, 3])
async def test_cancellation_inside_the_measured_call_changes_nothing(call: int) -> None:
    manager, recorder = await measured_manager(max_tokens=12_000)
    before = state_of(manager)
    with pytest.raises(asyncio.CancelledError):
        await manager.get_measured_request_view(
            provider=None,
            retain_contents=[],
            count_view=RefOrchestrator(manager, cancel_on_call=call).count_view,
        )
    assert state_of(manager) == before
    assert recorder.named("context:compaction") == []


async def test_factory_runs_once_per_measured_call_and_developers_are_protected() -> None:
    manager = SimpleContextManager(token_meter="actual", max_tokens=12_000)
    await manager.add_message({"role": "user", "content": "Refactor the parser."})
    await manager.add_message({"role": "developer", "content": "house rules " * 20})
    await session(manager)
    calls: list[int] = []

    async def factory() -> str:
        calls.append(1)
        return "system"

    await manager.set_system_prompt_factory(factory)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=RefOrchestrator(manager).count_view
    )
    assert calls == [1]
    assert result["count_calls"] > 1
    assert any(m.get("role") == "developer" for m in result["base_view"])


async def test_capabilities_are_registered_by_mount() -> None:
    coordinator = MockCoordinator()
    await mount(coordinator, {"token_meter": "actual"})
    assert coordinator.get_capability("context.request_retention") is not None
    assert coordinator.get_capability("context.measured_request_view") is not None
    estimate = MockCoordinator()
    await mount(estimate, {})
    assert estimate.get_capability("context.measured_request_view") is None


# --- property: a failed call leaves no trace --------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.integers(2, 20),
    budget=st.integers(2_000, 20_000),
    failure=st.sampled_from(
        ["cancel_emit", "cancel_provider", "too_small", "unknown_body", "count_cancel"]
    ),
)
async def test_failed_call_is_invisible_to_the_next_request(
    turns: int, budget: int, failure: str
) -> None:
    hooks = CancelAt()
    manager = SimpleContextManager(max_tokens=budget, token_meter="actual", hooks=hooks)
    twin = SimpleContextManager(max_tokens=budget, token_meter="actual")
    for target in (manager, twin):
        await session(target, turns)
    await twin.get_messages_for_request()
    await manager.get_messages_for_request()
    await manager.add_message({"role": "user", "content": "and one more thing " * 50})
    await twin.add_message({"role": "user", "content": "and one more thing " * 50})
    hooks.event = "context:pre_compact" if failure == "cancel_emit" else None
    try:
        if failure == "count_cancel":
            await manager.get_measured_request_view(
                provider=None,
                retain_contents=[],
                count_view=RefOrchestrator(manager, cancel_on_call=2).count_view,
            )
        else:
            await manager.get_messages_for_request_retaining(
                retain_contents=["nope"] if failure == "unknown_body" else [REMINDER],
                provider=Provider(cancel=failure == "cancel_provider"),
                token_budget=200 if failure == "too_small" else None,
                hard_fit=True,
            )
    except (asyncio.CancelledError, ValueError, ContextLengthError):
        pass
    hooks.event = None
    mine, theirs = await manager.get_messages_for_request(), await twin.get_messages_for_request()
    assert without_timestamps(mine) == without_timestamps(theirs)


def without_timestamps(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Admission stamps wall-clock time; the twins were fed a few microseconds apart."""
    cleaned = []
    for message in view:
        meta = {k: v for k, v in (message.get("metadata") or {}).items() if k != "timestamp"}
        cleaned.append({**message, "metadata": meta})
    return cleaned
