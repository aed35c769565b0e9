"""The negotiated measured path (``context.measured_request_view``): fail closed over the hard
limit whatever the measurement says, validate the hard-safety fields, fall back to the last
counted view when a count becomes unavailable, and a transaction that rolls back exactly.

Driven through the reference orchestrator double of the protocol tests (counts are our view
estimate plus a fixed overhead) and, for the transaction, through ``mount`` on the host's
real hook registry and the capabilities it registers.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest
from amplifier_core import HookResult
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.testing import MockCoordinator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    ContextConfig,
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
    mount,
)

from ..conftest import Recorder
from ..test_protocols import (
    REMINDER,
    TOOLS_OVERHEAD,
    CancelAt,
    RefOrchestrator,
    session,
    without_timestamps,
)


class Ref(RefOrchestrator):
    """The reference double, plus scripted failures per count call (1-based).

    ``faults[n]`` is one of ``"none"`` (measurement None), ``"unusable"`` (a count of the
    wrong kind), ``"not_counted"`` (``budget_decision: None``) or ``"raise"`` (the count
    itself is cancelled). ``faults_from`` applies a fault to that call and every later one.
    """

    def __init__(
        self,
        manager: SimpleContextManager,
        *,
        faults: dict[int, str] | None = None,
        faults_from: tuple[int, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self.faults = dict(faults or {})
        self.faults_from = faults_from
        self.envelopes: list[dict[str, Any]] = []

    def fault(self, call: int) -> str | None:
        if call in self.faults:
            return self.faults[call]
        if self.faults_from is not None and call >= self.faults_from[0]:
            return self.faults_from[1]
        return None

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        envelope = await super().count_view(view)
        fault = self.fault(len(self.counted))
        if fault == "raise":
            raise asyncio.CancelledError
        decision = envelope["budget_decision"]
        if fault == "none":
            decision["measurement"] = None
        elif fault == "unusable":
            decision["measurement"] = {"kind": "heuristic", "source": "x", "input_tokens": 5}
        elif fault == "not_counted":
            envelope["budget_decision"] = None
        self.envelopes.append(envelope)
        return envelope


def state_of(manager: SimpleContextManager) -> tuple[Any, ...]:
    """Everything observable through the public surface that a request may change."""
    return (
        manager.compaction_level,
        manager.compaction_stats,
        manager.token_meter_stats,
        manager.view_repairs,
        manager.meter.snapshot(),
        copy.deepcopy(manager.messages),
    )


async def measured(**config: Any) -> tuple[SimpleContextManager, Recorder]:
    recorder = Recorder()
    manager = SimpleContextManager(token_meter="actual", hooks=recorder, **config)
    await session(manager)
    return manager, recorder


async def call(manager: SimpleContextManager, ref: Ref, **kwargs: Any) -> dict[str, Any]:
    return await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=ref.count_view, **kwargs
    )


# ------------------------------------------------------------------ fail closed


@pytest.mark.parametrize("fault", ["none", "unusable"])
async def test_over_the_hard_limit_fails_closed_on_the_first_count(fault: str) -> None:
    manager, recorder = await measured(max_tokens=1_000_000)
    before = state_of(manager)
    ref = Ref(manager, limit=1_000, faults_from=(1, fault))
    with pytest.raises(ContextLengthError, match="limit"):
        await call(manager, ref)
    assert state_of(manager) == before
    assert recorder.events == []


async def test_the_issue_example_1001_over_1000_with_no_measurement() -> None:
    manager, _ = await measured()

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": 1_001,
                "input_limit_tokens": 1_000,
                "measurement": None,
            },
        }

    with pytest.raises(ContextLengthError):
        await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=count_view
        )


@pytest.mark.parametrize("fault", ["none", "unusable", "not_counted"])
async def test_over_the_hard_limit_fails_closed_on_a_later_count(fault: str) -> None:
    manager, _ = await measured(max_tokens=12_000)
    before = state_of(manager)
    # The first count is measured and over the limit; the next one is not usable.
    ref = Ref(manager, limit=5_000, faults_from=(2, fault))
    with pytest.raises(ContextLengthError):
        await call(manager, ref)
    assert len(ref.counted) == 2
    assert state_of(manager) == before


async def test_an_estimate_fallback_recount_over_the_limit_fails_closed() -> None:
    manager, _ = await measured(max_tokens=12_000, protected_recent=1.0, protected_tool_results=50)
    ref = Ref(manager, limit=5_000, faults_from=(1, "none"))
    with pytest.raises(ContextLengthError):
        await call(manager, ref)


async def test_unmeasured_but_within_the_limit_is_still_served() -> None:
    manager, _ = await measured(max_tokens=12_000)
    ref = Ref(manager, faults_from=(1, "none"))
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["base_view"] is ref.counted[-1]
    assert result["final_attempt"] is ref.envelopes[-1]
    assert await result["transaction"].commit() is True


async def test_not_counted_stays_legal() -> None:
    manager, recorder = await measured(max_tokens=1_000_000)
    ref = Ref(manager, faults_from=(1, "not_counted"))
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["measured_before"] is None
    assert await result["transaction"].commit() is True
    assert recorder.named("context:compaction") == []


# ------------------------------------------------------------------ hard-safety fields


@pytest.mark.parametrize("field", ["estimated_input_tokens", "input_limit_tokens"])
@pytest.mark.parametrize("value", [-1, True, False, 1.5, "10", None, "missing"])
async def test_hard_safety_fields_are_validated(field: str, value: Any) -> None:
    manager, _ = await measured()
    before = state_of(manager)

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        decision: dict[str, Any] = {
            "estimated_input_tokens": 100,
            "input_limit_tokens": 1_000,
            "measurement": {"kind": "provider_count", "source": "s", "input_tokens": 90},
        }
        if value == "missing":
            del decision[field]
        else:
            decision[field] = value
        return {"dispatch": {}, "budget_decision": decision}

    with pytest.raises(TypeError, match=field):
        await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=count_view
        )
    assert state_of(manager) == before


# ------------------------------------------------------------------ unavailable mid-walk


@pytest.mark.parametrize("fault", ["none", "unusable", "not_counted"])
async def test_a_count_lost_mid_walk_falls_back_to_the_last_counted_view(fault: str) -> None:
    manager, recorder = await measured(max_tokens=12_000)
    ref = Ref(manager, faults={3: fault})
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["count_calls"] == 3
    assert result["base_view"] is ref.counted[1], "the last view with a usable count"
    assert result["final_attempt"] is ref.envelopes[1], "with its own envelope"
    assert result["measured_after"] == ref.envelopes[1]["budget_decision"]["estimated_input_tokens"]
    assert check_view(result["base_view"], history=manager.messages) == []
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert event["outcome"] == "measurement_unavailable"
    assert event["measured_after"] == result["measured_after"]
    assert manager.compaction_level > 0


async def test_a_count_lost_on_the_first_rung_returns_the_base_view() -> None:
    manager, recorder = await measured(max_tokens=12_000)
    ref = Ref(manager, faults={2: "none"})
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["base_view"] is ref.counted[0]
    assert result["final_attempt"] is ref.envelopes[0]
    assert await result["transaction"].commit() is True
    assert recorder.named("context:compaction") == []
    assert manager.compaction_level == 0


# ------------------------------------------------------------------ the transaction


async def mounted(**config: Any) -> tuple[SimpleContextManager, MockCoordinator]:
    coordinator = MockCoordinator()
    await mount(coordinator, {"token_meter": "actual", "max_tokens": 12_000, **config})
    manager: SimpleContextManager = coordinator.mount_points["context"]
    await session(manager)
    return manager, coordinator


def heard_compactions(coordinator: MockCoordinator) -> list[dict[str, Any]]:
    """The payloads of ``context:compaction`` the coordinator's hooks deliver, as they come."""
    heard: list[dict[str, Any]] = []

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        heard.append(data)
        return HookResult(action="continue")

    coordinator.hooks.register("context:compaction", on_compaction, name="seen")
    return heard


def compaction_state(manager: SimpleContextManager) -> tuple[Any, ...]:
    return (manager.compaction_level, manager.compaction_stats, manager.token_meter_stats)


@pytest.mark.parametrize("how", ["rollback", "is_cancelled"])
async def test_rolled_back_during_delivery_undoes_the_compaction_and_keeps_readings(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # At this window the compaction both leaves messages out and shortens tool results.
    manager, coordinator = await mounted(max_tokens=16_000)
    measured_view = coordinator.get_capability("context.measured_request_view")
    record = coordinator.get_capability("context.foreground_usage")()
    ref = Ref(manager)
    result = await measured_view(provider=None, retain_contents=[], count_view=ref.count_view)
    assert result["outcome"] in ("target_reached", "protected_floor"), "a compaction is staged"
    transaction = result["transaction"]
    before = compaction_state(manager)
    cancelled = False
    seen: list[dict[str, Any]] = []

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        nonlocal cancelled
        seen.append(data)
        assert record(input_tokens=4_321)  # a reading arrives meanwhile
        if how == "rollback":
            transaction.rollback()
        else:
            cancelled = True
        return HookResult(action="continue")

    coordinator.hooks.register("context:compaction", on_compaction, name="canceller")
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    readings = manager.meter.reading_count
    assert await transaction.commit(is_cancelled=lambda: cancelled) is False
    assert len(seen) == 1, "hooks saw the event"
    assert compaction_state(manager) == before
    assert manager.meter.latest_reading == 4_321, "readings that arrived are kept"
    assert manager.meter.reading_count == readings + 1
    assert manager.meter.foreground_claimed is True, "the orchestrator still owns the count"
    # The warning names the compaction the hooks saw, in the figures its event carried.
    [warning] = [r.getMessage() for r in caplog.records if "did not take effect" in r.getMessage()]
    assert warning == (
        "context-simple: the measured request was rolled back after context:compaction was "
        "delivered; hooks saw a compaction (level {strategy_level}, {messages_removed} messages "
        "removed, {messages_truncated} truncated) that did not take effect".format(**seen[0])
    )
    assert seen[0]["messages_removed"] > 0 and seen[0]["messages_truncated"] > 0
    assert await transaction.commit() is False, "the answer is final"


async def test_cancelled_during_delivery_keeps_the_compaction() -> None:
    hooks = CancelAt("context:post_compact")
    manager = SimpleContextManager(token_meter="actual", max_tokens=12_000, hooks=hooks)
    await session(manager)
    result = await call(manager, Ref(manager))
    transaction = result["transaction"]
    with pytest.raises(asyncio.CancelledError):
        await transaction.commit()
    assert len(hooks.named("context:compaction")) == 1
    assert manager.compaction_level > 0, "delivery started: the compaction is retained"
    assert await transaction.commit() is True


@pytest.mark.parametrize("how", ["rollback", "is_cancelled"])
async def test_rollback_before_delivery_changes_nothing(how: str) -> None:
    manager, coordinator = await mounted()
    ref = Ref(manager)
    result = await call(manager, ref)
    transaction = result["transaction"]
    before = state_of(manager)
    cancelled = False

    async def on_pre(event: str, data: dict[str, Any]) -> HookResult:
        nonlocal cancelled
        if how == "rollback":
            transaction.rollback()
        else:
            cancelled = True
        return HookResult(action="continue")

    coordinator.hooks.register("context:pre_compact", on_pre, name="pre")
    compactions = heard_compactions(coordinator)
    assert await transaction.commit(is_cancelled=lambda: cancelled) is False
    assert state_of(manager) == before
    assert compactions == [], "stopped before the commit: no hook hears of a compaction"
    assert await transaction.commit() is False, "the answer is final"


async def test_a_committed_measured_request_leaves_the_state_an_ordinary_one_would() -> None:
    image = {
        "role": "user",
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    orphan = {"role": "tool", "tool_call_id": "ghost", "content": "from nowhere"}
    managers = []
    for _ in range(2):
        manager = SimpleContextManager(token_meter="actual", max_tokens=1_000_000)
        await manager.add_message({"role": "user", "content": "Refactor the parser."})
        await manager.add_message(image)
        await manager.add_message(orphan)
        await manager.add_message({"role": "assistant", "content": "ok"})
        managers.append(manager)
    measured_one, ordinary = managers
    for manager in managers:
        await manager.get_messages_for_request()
        assert manager.claim_foreground_usage()(input_tokens=150)
    result = await call(measured_one, Ref(measured_one))
    assert result["outcome"] == "not_needed"
    assert await result["transaction"].commit() is True
    await ordinary.get_messages_for_request()
    assert measured_one.view_repairs == ordinary.view_repairs != ()
    assert measured_one.token_meter_stats == ordinary.token_meter_stats
    stats = measured_one.token_meter_stats
    assert stats is not None and stats["images_measured"] is True


async def test_the_above_target_warning_counts_the_system_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, _ = await measured(max_tokens=12_000)
    await manager.set_system_prompt_factory(lambda: "rules " * 8_000)
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    result = await call(manager, Ref(manager))
    assert await result["transaction"].commit() is True
    assert any("system messages alone" in r.getMessage() for r in caplog.records)


class CountsLow(Ref):
    """A provider whose count is a tenth of our estimate: the view is far smaller than we think."""

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        envelope = await super().count_view(view)
        decision = envelope["budget_decision"]
        low = max(1, decision["estimated_input_tokens"] // 10)
        decision["estimated_input_tokens"] = low
        decision["measurement"]["input_tokens"] = low
        return envelope


async def test_a_view_the_count_finds_small_is_not_reported_over_the_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Our estimate puts the untouched view over the budget; the provider's count is far under
    # the trigger. Nothing is compacted, and the count, not the estimate, sizes the request.
    manager, _ = await measured(max_tokens=12_000)
    assert sum(estimate_message_tokens(m) for m in manager.messages) > 12_000
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    result = await call(manager, CountsLow(manager))
    assert result["outcome"] == "not_needed" and result["measured_before"] < result["trigger"]
    assert await result["transaction"].commit() is True
    # Nor is anything else said: the commit warns of nothing (what lies outside the context
    # is the planner's to report, from its own readings).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# ------------------------------------------------------------------ property


FAILURES = (
    "refuse_first",  # no measurement, over the limit
    "unusable_later",
    "not_counted_later",
    "cancel_count",
    "cancel_pre_compact",
    "rollback_delivery",
    "is_cancelled_delivery",
    "malformed",
    "commit_cancelled_before",
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.integers(2, 20),
    budget=st.integers(3_000, 20_000),
    failure=st.sampled_from(FAILURES),
    cancel_call=st.integers(1, 9),
)
async def test_a_failed_measured_call_is_invisible_to_the_next_request(
    turns: int, budget: int, failure: str, cancel_call: int
) -> None:
    coordinator = MockCoordinator()
    await mount(coordinator, {"token_meter": "actual", "max_tokens": budget})
    manager: SimpleContextManager = coordinator.mount_points["context"]
    twin = SimpleContextManager(max_tokens=budget, token_meter="actual")
    for target in (manager, twin):
        await session(target, turns)
        await target.add_message({"role": "user", "content": "and one more thing " * 50})
    await twin.get_messages_for_request()
    await manager.get_messages_for_request()
    for target in (manager, twin):
        await target.add_message({"role": "user", "content": "next " * 40})
    transaction_box: list[Any] = []
    cancelled = False

    async def on_pre(event: str, data: dict[str, Any]) -> HookResult:
        if failure == "cancel_pre_compact":
            raise asyncio.CancelledError
        return HookResult(action="continue")

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        nonlocal cancelled
        if failure == "rollback_delivery" and transaction_box:
            transaction_box[0].rollback()
        if failure == "is_cancelled_delivery":
            cancelled = True
        return HookResult(action="continue")

    coordinator.hooks.register("context:pre_compact", on_pre, name="pre")
    coordinator.hooks.register("context:compaction", on_compaction, name="comp")
    ref = {
        "refuse_first": Ref(manager, limit=10, faults_from=(1, "none")),
        "unusable_later": Ref(manager, limit=10, faults_from=(2, "unusable")),
        "not_counted_later": Ref(manager, limit=10, faults_from=(2, "not_counted")),
        "cancel_count": Ref(manager, faults={cancel_call: "raise"}),
    }.get(failure, Ref(manager))

    async def malformed(view: list[dict[str, Any]]) -> dict[str, Any]:
        return {"dispatch": {}, "budget_decision": {"estimated_input_tokens": True}}

    try:
        result = await manager.get_measured_request_view(
            provider=None,
            retain_contents=[],
            count_view=malformed if failure == "malformed" else ref.count_view,
        )
        transaction = result["transaction"]
        transaction_box.append(transaction)
        if failure == "commit_cancelled_before":
            assert await transaction.commit(is_cancelled=lambda: True) is False
        else:
            committed = await transaction.commit(is_cancelled=lambda: cancelled)
            if committed:
                return  # nothing failed (e.g. no compaction was staged): nothing to compare
    except (asyncio.CancelledError, ContextLengthError, TypeError):
        pass
    mine, theirs = await manager.get_messages_for_request(), await twin.get_messages_for_request()
    assert without_timestamps(mine) == without_timestamps(theirs)
    assert manager.compaction_level == twin.compaction_level


async def test_the_measured_payload_names_the_count_and_the_overhead() -> None:
    manager, recorder = await measured(max_tokens=16_000)
    ref = Ref(manager)
    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[REMINDER], count_view=ref.count_view
    )
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert event["measured_tokens"] == result["measured_before"]
    assert event["overhead_tokens"] == TOOLS_OVERHEAD


async def test_a_reading_during_a_rolled_back_delivery_answers_what_really_went_out() -> None:
    manager, coordinator = await mounted()
    twin, twin_coordinator = await mounted()
    record = coordinator.get_capability("context.foreground_usage")()
    twin_record = twin_coordinator.get_capability("context.foreground_usage")()
    measured_view = coordinator.get_capability("context.measured_request_view")
    result = await measured_view(
        provider=None, retain_contents=[], count_view=Ref(manager).count_view
    )
    transaction = result["transaction"]

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        assert record(input_tokens=12_345)
        transaction.rollback()
        return HookResult(action="continue")

    coordinator.hooks.register("context:compaction", on_compaction, name="canceller")
    assert await transaction.commit() is False
    # The twin never made the measured call and got the same reading.
    assert twin_record(input_tokens=12_345)
    assert manager.meter.pair_count == twin.meter.pair_count
    assert manager.meter.size_model == twin.meter.size_model
    view = await manager.get_messages_for_request()
    assert without_timestamps(view) == without_timestamps(await twin.get_messages_for_request())
    assert manager.token_meter_stats == twin.token_meter_stats


async def test_a_not_needed_commit_after_another_request_escalated_is_refused() -> None:
    manager, _ = await mounted(max_tokens=200_000)
    result = await call(manager, Ref(manager))
    assert result["outcome"] == "not_needed"
    await manager.get_messages_for_request(token_budget=8_000)
    assert manager.compaction_level > 0, "an ordinary request escalated meanwhile"
    assert await result["transaction"].commit() is False


async def test_a_request_that_escalates_while_pre_compact_is_delivered_makes_the_commit_fail() -> (
    None
):
    manager, coordinator = await mounted()
    result = await call(manager, Ref(manager))
    transaction = result["transaction"]

    requested: list[bool] = []

    async def on_pre(event: str, data: dict[str, Any]) -> HookResult:
        if not requested:  # the ordinary request's own pre_compact comes here too
            requested.append(True)
            await manager.get_messages_for_request(token_budget=4_000)
        return HookResult(action="continue")

    coordinator.hooks.register("context:pre_compact", on_pre, name="meanwhile")
    compactions = heard_compactions(coordinator)
    assert await transaction.commit() is False
    ordinary = manager.compaction_stats
    assert len(compactions) == 1 and ordinary is not None
    assert compactions[0]["budget"] == ordinary["budget"], "only the ordinary request's event"
    assert await transaction.commit() is False, "the answer is final"


async def test_a_commit_reentered_from_a_hook_during_delivery_is_not_dispatchable() -> None:
    manager, coordinator = await mounted()
    result = await call(manager, Ref(manager))
    transaction = result["transaction"]
    inner: list[bool] = []

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        inner.append(await transaction.commit())
        return HookResult(action="continue")

    coordinator.hooks.register("context:compaction", on_compaction, name="reenter")
    assert await transaction.commit() is True
    assert inner == [False], "the view was not committed yet while its event was delivered"
    assert manager.compaction_level > 0


async def test_a_commit_cancelled_before_it_starts_is_a_final_no() -> None:
    manager, _ = await mounted()
    result = await call(manager, Ref(manager))
    transaction = result["transaction"]
    before = state_of(manager)
    assert await transaction.commit(is_cancelled=lambda: True) is False
    assert transaction.done
    assert await transaction.commit() is False, "the answer is final"
    assert state_of(manager) == before


async def test_a_measured_compaction_reports_the_view_that_goes_out() -> None:
    # The notice is counted at its map's whole room wherever a figure decides something; the
    # event reports the view as it goes out (the plain path's ``after_tokens`` does too).
    manager, coordinator = await mounted()
    seen: list[dict[str, Any]] = []

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        seen.append(data)
        return HookResult(action="continue")

    coordinator.hooks.register("context:compaction", on_compaction, name="after")
    result = await call(manager, Ref(manager))
    assert result["outcome"] in ("target_reached", "protected_floor"), "a compaction is staged"
    assert await result["transaction"].commit() is True
    [payload] = seen
    view = result["base_view"]
    assert payload["after_messages"] == len(view)
    assert payload["after_tokens"] == sum(estimate_message_tokens(m) for m in view)


# ------------------------------------------------------------------ what the result reports


async def test_the_result_names_the_budget_and_the_figures_the_walk_compared_with() -> None:
    manager, recorder = await measured(max_tokens=20_000)
    ref = Ref(manager)
    result = await call(manager, ref)
    assert result["outcome"] == "target_reached"
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    # The usable budget and the target, as the compaction reports them; the trigger is the
    # configured share of that budget, reported whole.
    assert result["policy_budget"] == event["budget"] < 20_000
    assert result["target"] == event["target_tokens"]
    config = ContextConfig()
    assert result["trigger"] == int(config.compact_threshold * result["policy_budget"])
    assert isinstance(result["trigger"], int)
    first = ref.envelopes[0]["budget_decision"]["measurement"]["input_tokens"]
    assert result["measured_before"] == first >= result["trigger"], "it escalated on the count"
    assert result["measured_after"] <= result["target"] < first
    assert result["unusable_reason"] is None, "every count was usable"
    assert result["count_calls"] == len(ref.counted)


async def test_an_uncounted_request_that_needs_no_compaction_sends_the_view_it_had_counted() -> (
    None
):
    manager, _ = await measured(max_tokens=1_000_000)
    ref = Ref(manager, faults={1: "none"})
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["base_view"] is ref.counted[0]
    assert result["final_attempt"] is ref.envelopes[0]
    assert result["count_calls"] == 1
    assert result["measured_after"] is None


async def test_an_uncounted_request_that_compacts_reports_the_count_of_what_goes_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="amplifier_module_context_simple")
    manager, recorder = await measured(max_tokens=12_000)
    # The first count has no measurement; the recount of the estimate's view has one.
    ref = Ref(manager, faults={1: "none"})
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["count_calls"] == len(ref.counted) == 2
    assert result["base_view"] is ref.counted[1]
    recount = ref.envelopes[1]["budget_decision"]["measurement"]["input_tokens"]
    assert result["measured_after"] == recount
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert event["measured_after"] == recount
    assert event["measurement_source"] == "ref-count"
    [record] = [r for r in caplog.records if "unusable" in r.getMessage()]
    assert record.levelno == logging.WARNING, "a count in the wrong shape is a bug"
    assert record.name == "amplifier_module_context_simple.session._measured"
    assert record.getMessage() == (
        "context-simple: measured request view: the provider's count is unusable "
        f"({result['unusable_reason']}); planned on the estimate"
    )


async def test_a_request_the_orchestrator_did_not_count_is_logged_as_information(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="amplifier_module_context_simple")
    manager, _ = await measured(max_tokens=1_000_000)
    result = await call(manager, Ref(manager, faults={1: "not_counted"}))
    [record] = [r for r in caplog.records if "unusable" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert result["unusable_reason"] in record.getMessage()


async def test_the_estimate_fallback_keeps_protected_content_whole() -> None:
    # Everything is protected and over the budget, but within the provider's limit: without a
    # count the module plans on its estimate and does not relax protection (the orchestrator's
    # count decides whether the request can go).
    manager, _ = await measured(max_tokens=4_000, protected_recent=1.0, protected_tool_results=50)
    ref = Ref(manager, faults_from=(1, "none"))
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    view = result["base_view"]
    assert not any(m.get("_truncated") for m in view if m.get("role") == "tool")
    assert sum(1 for m in view if m.get("role") == "tool") == 24


async def test_stopping_at_the_protected_floor_is_logged_with_its_figures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    manager, _ = await measured(max_tokens=4_000, protected_recent=1.0, protected_tool_results=50)
    result = await call(manager, Ref(manager))
    assert result["outcome"] == "protected_floor"
    [record] = [r for r in caplog.records if "protected floor" in r.getMessage()]
    assert record.getMessage() == (
        "context-simple: measured compaction stopped at the protected floor "
        f"({result['measured_after']} tokens against a target of {result['target']}): "
        "protected content is larger than the target"
    )
    assert result["measured_after"] > result["target"]


async def test_a_count_at_the_trigger_escalates_and_one_below_it_does_not() -> None:
    manager, _ = await measured(max_tokens=20_000)
    probe = await call(manager, Ref(manager))  # never committed: it only reads the trigger
    trigger = probe["trigger"]

    def counting(first: int) -> Any:
        ref = Ref(manager)

        async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
            envelope = await ref.count_view(view)
            if len(ref.counted) == 1:  # the first candidate counts exactly ``first``
                decision = envelope["budget_decision"]
                decision["measurement"]["input_tokens"] = first
                decision["estimated_input_tokens"] = first
            return envelope

        return count_view

    for first, outcome in ((trigger - 1, "not_needed"), (trigger, "target_reached")):
        result = await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=counting(first)
        )
        assert (result["measured_before"], result["outcome"]) == (first, outcome)


async def test_after_a_measured_compaction_the_next_request_sends_the_same_view() -> None:
    manager, recorder = await measured(max_tokens=20_000)
    first = await call(manager, Ref(manager))
    assert first["outcome"] == "target_reached"
    assert await first["transaction"].commit() is True
    # Nothing new: the compaction stands, notice and all, and the next count needs nothing.
    ref = Ref(manager)
    again = await call(manager, ref)
    assert again["outcome"] == "not_needed"
    assert again["base_view"] == first["base_view"]
    assert await again["transaction"].commit() is True
    measured_stats = manager.token_meter_stats
    ordinary = await manager.get_messages_for_request()
    assert without_timestamps(ordinary) == without_timestamps(again["base_view"])
    assert manager.token_meter_stats == measured_stats, "as an ordinary request reads the meter"
    assert len(recorder.named("context:compaction")) == 1


def relief_envelope(view: list[dict[str, Any]], tokens: int) -> dict[str, Any]:
    """What a ``fit_output`` that found a smaller output allowance returns: one more count."""
    return {
        "dispatch": {"messages": view},
        "budget_decision": {
            "estimated_input_tokens": tokens,
            "input_limit_tokens": tokens,
            "measurement": {"kind": "provider_count", "source": "relief", "input_tokens": tokens},
        },
        "count_calls": 1,
    }


async def test_a_floor_over_the_limit_goes_out_with_the_envelope_fit_output_relieved() -> None:
    manager, recorder = await measured(
        max_tokens=12_000, protected_recent=1.0, protected_tool_results=50
    )
    ref = Ref(manager, limit=5_000)
    relieved: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    async def fit_output(view: list[dict[str, Any]], attempt: Any) -> dict[str, Any]:
        assert attempt is ref.envelopes[-1], "asked about the last envelope counted"
        relieved.append((view, relief_envelope(view, 5_000)))
        return relieved[-1][1]

    result = await call(manager, ref, fit_output=fit_output)
    assert result["outcome"] == "reduced_output"
    [(view, envelope)] = relieved
    assert result["base_view"] is view is ref.counted[-1]
    assert result["final_attempt"] is envelope
    assert (result["measured_after"], result["count_calls"]) == (5_000, len(ref.counted) + 1)
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert (event["outcome"], event["measurement_source"]) == ("reduced_output", "relief")
    assert manager.compaction_level > 0


async def test_a_floor_over_the_limit_that_fit_output_cannot_relieve_is_refused() -> None:
    manager, _ = await measured(max_tokens=12_000, protected_recent=1.0, protected_tool_results=50)
    before = state_of(manager)
    ref = Ref(manager, limit=5_000)

    async def no_relief(view: list[dict[str, Any]], attempt: Any) -> None:
        return None

    with pytest.raises(ContextLengthError) as refused:
        await call(manager, ref, fit_output=no_relief)
    last = ref.envelopes[-1]["budget_decision"]
    assert str(refused.value) == (
        f"context-simple: the request is ~{last['estimated_input_tokens']} input tokens by the "
        "provider's count and its limit is 5000, after every legal compaction step; shorten "
        "the system prompt, the first or latest prompt, or the retained reminders"
    )
    assert state_of(manager) == before


async def test_the_walk_stops_at_the_first_count_within_the_target_and_returns_its_envelope() -> (
    None
):
    for max_tokens, outcome in ((20_000, "target_reached"), (4_000, "protected_floor")):
        manager, _ = await measured(max_tokens=max_tokens)
        ref = Ref(manager)
        result = await call(manager, ref)
        assert result["outcome"] == outcome
        assert result["final_attempt"] is ref.envelopes[-1]
        assert result["base_view"] is ref.counted[-1]
        counts = [e["budget_decision"]["measurement"]["input_tokens"] for e in ref.envelopes]
        assert all(c > result["target"] for c in counts[:-1]), "no count after the target"


async def test_a_count_exactly_at_the_target_reaches_it() -> None:
    manager, _ = await measured(max_tokens=20_000)
    probe = await call(manager, Ref(manager))  # never committed: it only reads the target
    target = probe["target"]
    ref = Ref(manager)

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        envelope = await ref.count_view(view)
        if len(ref.counted) == 2:  # the first rung's view counts exactly the target
            decision = envelope["budget_decision"]
            decision["measurement"]["input_tokens"] = target
            decision["estimated_input_tokens"] = target
        return envelope

    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=count_view
    )
    assert (result["measured_after"], result["outcome"]) == (target, "target_reached")
    assert result["count_calls"] == 2


async def test_the_measured_path_without_an_actual_meter_says_how_to_enable_it() -> None:
    manager = SimpleContextManager()
    await session(manager)
    with pytest.raises(RuntimeError) as refused:
        await call(manager, Ref(manager))
    assert str(refused.value) == (
        "get_measured_request_view needs token_meter='actual' in the context-simple config"
    )


async def test_a_measured_floor_over_the_budget_is_reported_at_its_counted_size(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    manager, _ = await measured(max_tokens=4_000)
    # Tool definitions come off the view's share of the budget, not off the whole request's.
    tool = {"name": "bash", "description": "Run a command. " * 40, "input_schema": {}}
    manager.set_tool_definitions([tool])
    result = await call(manager, Ref(manager))
    assert result["outcome"] == "protected_floor"
    assert await result["transaction"].commit() is True
    # The walk's counts size the view: the warning states what the provider counted (tools
    # and all), against the budget of the whole request.
    [record] = [r for r in caplog.records if "is over the budget" in r.getMessage()]
    assert record.args == (result["measured_after"], 4_000)
