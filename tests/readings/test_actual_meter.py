"""``token_meter: "actual"`` end to end through ``mount``, a real host hook registry and the
capabilities ``mount`` registers: the trigger follows the provider, and reductions are sized
with the modelled real size (``overhead + k * estimate``).

Readings reach the manager as the host delivers them: ``llm:response`` payloads emitted on
the real ``amplifier_core`` registry (which JSON-round-trips them), or through the recorder
of the ``context.foreground_usage`` capability.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from amplifier_core import HookResult
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.testing import MockCoordinator
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
    mount,
)

LINE = "compiled module_7 in 3.4s with 12 warnings\n"
COMPACTION_EVENTS = ("context:compaction", "context:pre_compact", "context:post_compact")


class Session:
    """A manager mounted on a mock coordinator with the host's real hook registry."""

    def __init__(self, coordinator: MockCoordinator, manager: SimpleContextManager) -> None:
        self.coordinator = coordinator
        self.manager = manager
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.turn = 0

    @classmethod
    async def start(cls, **config: Any) -> Session:
        coordinator = MockCoordinator()
        await mount(coordinator, {"token_meter": "actual", **config})
        session = cls(coordinator, coordinator.mount_points["context"])

        async def record(event: str, data: dict[str, Any]) -> HookResult:
            session.events.append((event, data))
            return HookResult(action="continue")

        for name in COMPACTION_EVENTS:
            coordinator.hooks.register(name, record, name=f"test-{name}")
        return session

    def named(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == event]

    async def respond(self, input_tokens: int, **usage: Any) -> None:
        """An ``llm:response`` as a provider emits it (the registry JSON-round-trips it)."""
        payload = {
            "provider": "test",
            "status": "ok",
            "usage": {"input_tokens": input_tokens, "output_tokens": 12, **usage},
        }
        await self.coordinator.hooks.emit("llm:response", json.loads(json.dumps(payload)))

    async def tool_turn(self, lines: int) -> None:
        call_id = f"call_{self.turn}"
        self.turn += 1
        await self.manager.add_message(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "tool": "bash", "arguments": {}}],
            }
        )
        await self.manager.add_message(
            {"role": "tool", "tool_call_id": call_id, "content": LINE * lines}
        )

    async def view(self, **kwargs: Any) -> list[dict[str, Any]]:
        view = await self.manager.get_messages_for_request(**kwargs)
        assert check_view(view, history=self.manager.messages) == []
        return view


def tokens(view: Sequence[Mapping[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


def usable(manager: SimpleContextManager) -> int:
    """The budget the trigger and target are shares of (no provider: the capped fallback)."""
    assert manager.max_tokens is not None
    effective = min(manager.max_tokens, manager.max_tokens_fallback)
    return effective - manager.compaction_notice_token_reserve


def trigger(manager: SimpleContextManager) -> float:
    return manager.compact_threshold * usable(manager)


# ------------------------------------------------------------------ the trigger


async def test_a_reading_below_the_estimate_compacts_later_than_the_estimator() -> None:
    session = await Session.start(max_tokens=10_800)
    twin = SimpleContextManager(max_tokens=10_800)  # estimate mode
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Collect the build logs."})
    for _ in range(6):
        await session.tool_turn(30)
    first = await session.view()
    await session.respond(tokens(first) // 2)  # our estimator counts double here
    for _ in range(14):
        await session.tool_turn(30)
    for message in manager.messages:
        await twin.add_message(message)
    estimate = tokens(await manager.get_messages())
    assert estimate >= trigger(manager), "the estimator alone would compact"
    assert estimate // 2 < trigger(manager)

    view = await session.view()
    assert session.named("context:compaction") == []
    assert manager.compaction_level == 0
    assert view == await manager.get_messages()
    stats = manager.token_meter_stats
    assert stats is not None
    assert stats["source"] == "actual"
    assert stats["used"] < trigger(manager) <= stats["estimated"]
    await twin.get_messages_for_request()
    assert twin.compaction_level > 0


async def test_a_reading_far_above_the_estimate_escalates_and_names_the_overhead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """95,000 measured on a 100,000-token budget while the history estimates ~2,000."""
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    session = await Session.start(max_tokens=100_800)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Collect the build logs."})
    for _ in range(10):
        await session.tool_turn(5)
    first = await session.view()
    answered = tokens(first)
    assert answered < 3_000
    await session.respond(90_000, cache_read_tokens=80_000, cache_write_tokens=5_000)
    await session.tool_turn(5)
    grown = tokens(await manager.get_messages())

    view = await session.view()
    [event] = session.named("context:compaction")
    assert event["measured_tokens"] == 95_000 + (grown - answered)
    assert event["overhead_tokens"] == 95_000 - answered
    assert event["messages_truncated"] + event["messages_removed"] > 0
    assert event["target_tokens"] == int(0.5 * usable(manager))
    assert len(session.named("context:pre_compact")) == 1
    assert len(session.named("context:post_compact")) == 1
    assert tokens(view) < grown
    # No compaction gets the request under its target: the overhead is named as the reason.
    [above] = [r.getMessage() for r in caplog.records if "stays above" in r.getMessage()]
    assert "tokens of each request are outside this context (tool definitions" in above


async def test_nothing_to_change_warns_once_per_overhead_move_and_emits_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    session = await Session.start(max_tokens=100_800)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "What is in the repository?"})
    first = await session.view()
    answered = tokens(first)
    await session.respond(95_000)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "outside this context" in r.getMessage()]

    for _ in range(3):
        view = await session.view()
        await session.respond(95_000)
    assert view == first
    assert session.events == [], "no event without a change"
    [warning] = warnings()
    assert f"about {95_000 - answered} tokens of each request are outside this context" in warning
    assert "tool definitions, system overlays" in warning
    await session.view()
    await session.respond(99_000)  # the overhead moved by about 4%
    await session.view()
    await session.respond(60_000)  # under the trigger: nothing to say
    await session.view()
    assert len(warnings()) == 1
    await session.respond(110_000)  # the overhead moved by about 16%
    await session.view()
    assert len(warnings()) == 2
    assert f"about {110_000 - answered} tokens" in warnings()[-1]
    assert session.events == []


async def test_measured_and_overhead_are_null_when_nothing_was_measured() -> None:
    for mode in ("estimate", "actual"):
        session = await Session.start(max_tokens=6_000, token_meter=mode)
        await session.manager.add_message({"role": "user", "content": "Collect the logs."})
        if mode == "estimate":
            await session.view()
            await session.respond(5_000)  # estimate mode reports it but never uses it
        for _ in range(12):
            await session.tool_turn(30)
        await session.view()
        events = session.named("context:compaction")
        assert events, mode
        for event in events:
            assert "measured_tokens" in event and event["measured_tokens"] is None
            assert "overhead_tokens" in event and event["overhead_tokens"] is None


async def test_the_foreground_recorder_follows_the_same_rules() -> None:
    session = await Session.start(max_tokens=100_800)
    manager = session.manager
    record = session.coordinator.get_capability("context.foreground_usage")()
    await manager.add_message({"role": "user", "content": "Collect the build logs."})
    for _ in range(10):
        await session.tool_turn(5)
    answered = tokens(await session.view())
    assert record(input_tokens=60_000, cache_write_tokens=35_000) is True
    await session.respond(10)  # a generic reading after the claim: observational only
    assert record(input_tokens=1_000) is True  # a foreground side call: recorded only
    assert manager.meter.latest_reading == 1_000
    await session.tool_turn(5)
    await session.view()
    [event] = session.named("context:compaction")
    assert event["overhead_tokens"] == 95_000 - answered


# ------------------------------------------------------------------ hard fit


async def _hard_fit_session(ratio: float) -> tuple[Session, int]:
    session = await Session.start(max_tokens=10_800)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Collect the build logs."})
    for size in (4, 3):  # two views of different size: the model knows k
        for _ in range(size):
            await session.tool_turn(20)
        view = await session.view()
        await session.respond(math.ceil(ratio * tokens(view)))
    assert manager.token_meter_stats is not None
    assert manager.token_meter_stats["measured"] is not None
    return session, tokens(view)


async def test_hard_fit_holds_against_the_estimate_as_well_as_the_model() -> None:
    """The readings say the estimator counts double; hard fit still keeps the estimate within
    the budget (a model can be learned from noise: issue 28), while the plain path trusts
    the model and sends the view whole."""
    session, _ = await _hard_fit_session(0.5)
    manager = session.manager
    for _ in range(22):
        await session.tool_turn(20)
    history = await manager.get_messages()
    assert tokens(history) > 10_800, "the raw estimate is over the budget"
    assert 0.5 * tokens(history) < trigger(manager)
    assert await manager.get_messages_for_request() == history
    view = await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert check_view(view, history=manager.messages) == []
    assert tokens(view) <= 10_800
    assert len(session.named("context:compaction")) == 1


async def test_hard_fit_fails_closed_on_the_estimate_even_when_the_model_fits() -> None:
    session, _ = await _hard_fit_session(0.5)
    manager = session.manager
    # The latest prompt is floor: over the budget by our estimate, inside it by the model.
    await manager.add_message({"role": "user", "content": "word " * 12_000})
    history = await manager.get_messages()
    assert 0.5 * tokens(history[-1:]) < 10_800 < tokens(history[-1:])
    with pytest.raises(ContextLengthError, match="needs ~"):
        await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert session.events == []


async def test_hard_fit_reduces_until_the_modelled_size_fits() -> None:
    session, _ = await _hard_fit_session(3.0)
    manager = session.manager
    for _ in range(4):
        await session.tool_turn(20)
    view = await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert check_view(view, history=manager.messages) == []
    assert 3 * tokens(view) <= 10_800
    [event] = session.named("context:compaction")
    [notice] = [m for m in view if (m.get("metadata") or {}).get("source") == "context-compaction"]
    # The budget itself, less what the notice really costs (it must fit too).
    assert 0.9 * 10_800 < event["target_tokens"] <= 10_800 - 3 * tokens([notice])


async def test_hard_fit_fails_closed_in_modelled_units() -> None:
    session, _ = await _hard_fit_session(4.0)
    manager = session.manager
    # The latest prompt is floor: at 4x it alone is over the budget, whatever is relaxed.
    await manager.add_message({"role": "user", "content": "word " * 3_000})
    before = (manager.compaction_level, manager.compaction_stats, manager.token_meter_stats)
    with pytest.raises(ContextLengthError, match="needs ~"):
        await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert (manager.compaction_level, manager.compaction_stats, manager.token_meter_stats) == (
        before
    )
    assert session.events == []


# ------------------------------------------------------------------ the property


class SimulatedProvider:
    """Reports ``overhead + ratio * estimate`` for every view, like a provider that carries
    tool definitions the context never sees and counts tokens differently from us."""

    def __init__(self, ratio: float, overhead: int) -> None:
        self.ratio, self.overhead = ratio, overhead

    def real(self, view: Sequence[Mapping[str, Any]]) -> int:
        return self.overhead + math.ceil(self.ratio * tokens(view))


@settings(
    max_examples=75,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ratio=st.floats(0.25, 4.0),
    overhead_share=st.floats(0.0, 0.4),
    budget=st.integers(30_000, 250_000),
    sizes=st.lists(st.floats(0.0, 0.09), min_size=8, max_size=30),
    side_calls=st.lists(st.booleans(), min_size=30, max_size=30),
    via_recorder=st.booleans(),
)
@example(  # found by hypothesis: eight similar views made the fit forget k = 2
    ratio=2.0,
    overhead_share=0.0,
    budget=30_000,
    sizes=[0.0625] * 3 + [0.03125] * 5 + [0.0] * 7 + [0.0625],
    side_calls=[False] * 30,
    via_recorder=False,
)
def test_actual_mode_keeps_every_real_view_within_the_budget(
    ratio: float,
    overhead_share: float,
    budget: int,
    sizes: list[float],
    side_calls: list[bool],
    via_recorder: bool,
) -> None:
    """Readings 0.25x-4x our estimate plus up to 100,000 tokens of overhead; tool output of
    random size arrives between readings. Once the meter has seen two views of different
    size, every view's real size is within the budget, a figure over the trigger always
    compacts (a new tool result can always be shortened here), and every event carries a
    change. A figure under the trigger never compacts once the model is identified: two
    views identify it unless the provider counts less than our estimate *and* reports an
    overhead nothing accounts for (readings above what the requests carried, shrinking as
    a hook reminder can: no evidence that the estimator over-counts, issue 28)."""
    overhead = min(100_000, int(overhead_share * budget))
    provider = SimulatedProvider(ratio, overhead)
    identified = ratio >= 1 or overhead == 0

    async def run() -> None:
        session = await Session.start(
            max_tokens=budget, max_tokens_fallback=budget, protected_tool_results=2
        )
        manager = session.manager
        record = (
            session.coordinator.get_capability("context.foreground_usage")()
            if via_recorder
            else None
        )

        async def answer(reading: int) -> None:
            if record is not None:
                assert record(input_tokens=reading, cache_write_tokens=0)
            else:
                await session.respond(reading)

        def lines_for(share: float) -> int:
            # ``share`` of the budget in real tokens, in lines of our estimate.
            return max(8, int(share * budget / ratio / 11))

        await manager.add_message({"role": "user", "content": "Collect the build logs."})
        # Warm-up: two small views of clearly different size identify the model.
        for warm in (0.02, 0.05):
            await session.tool_turn(lines_for(warm))
            view = await session.view()
            await answer(provider.real(view))
        assert session.events == []
        high = trigger(manager)
        for number, share in enumerate(sizes):
            await session.tool_turn(lines_for(share))
            before = len(session.named("context:compaction"))
            # Until the first compaction the view that would go out is the whole history.
            would_be = provider.real(manager.messages) if manager.compaction_level == 0 else None
            view = await session.view()
            real = provider.real(view)
            events = session.named("context:compaction")[before:]
            assert len(events) <= 1
            assert real <= budget, f"request {number}: {real} real tokens over {budget}"
            if events:
                [event] = events
                changed = (
                    event["messages_removed"]
                    + event["messages_truncated"]
                    + event["user_messages_stubbed"]
                )
                assert changed > 0, "no event without a change"
                assert event["measured_tokens"] >= high
                assert event["overhead_tokens"] is not None
            else:
                stats = manager.token_meter_stats
                assert stats is not None
                assert stats["used"] < high, "a figure over the trigger always escalates"
            if would_be is not None:
                slack = 0.01 * budget
                if would_be < high - slack and identified:
                    assert not events, "a low figure never triggers"
                if would_be >= high + slack:
                    assert events, "a high figure always escalates"
            await answer(real)
            if side_calls[number]:
                await session.respond(max(1, budget * 2 - real))  # a side call: ignored
        assert manager.token_meter_stats is not None

    asyncio.run(run())
