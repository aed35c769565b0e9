"""Readings that cannot poison the budget (issue 28, section 1), on a real kernel coordinator.

Each test is one field failure: a slope learned from injection noise, an explicit budget's
reading compared as if it had held back the tools, a side call before the first view after a
resume, one inflated reading becoming the learned overhead, and decisions made under a budget
that later readings disproved.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.models import HookResult, ModelInfo

from amplifier_module_context_simple import check_view, mount
from amplifier_module_context_simple.readings._meter import OVERHEAD_STEP
from amplifier_module_context_simple.sizing._budget import PROVIDER_WARNINGS
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.sizing._room import DISPROVED_SHARE, disproved, made_under

CAPTURED = (
    "context:budget",
    "context:compaction",
    "context:reading_rejected",
)


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    PROVIDER_WARNINGS.clear()


class Tool:
    """A mounted tool as the orchestrators read it (``name``, ``description``, schema)."""

    def __init__(self, name: str, words: int) -> None:
        self.name = name
        self.description = " ".join(f"{name}-detail{i}" for i in range(words))
        self.input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}


class Provider:
    """Publishes one model's window and the output it sends (``defaults["max_tokens"]``)."""

    def __init__(self, window: int, output: int) -> None:
        self.window, self.output = window, output

    async def get_model_info(self) -> ModelInfo:
        return ModelInfo(
            id="test-model",
            display_name="Test",
            context_window=self.window,
            max_output_tokens=self.output,
            defaults={"max_tokens": self.output},
        )


class Session:
    """A manager mounted on a real kernel coordinator, its events captured."""

    def __init__(self, coordinator: Any, manager: Any) -> None:
        self.coordinator, self.manager = coordinator, manager
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.rounds = 0

    @classmethod
    async def start(cls, tool_words: int = 0, **config: Any) -> Session:
        kernel = AmplifierSession({"session": {"orchestrator": "none", "context": "none"}})
        coordinator = kernel.coordinator
        if tool_words:
            await coordinator.mount("tools", Tool("delegate", tool_words), name="delegate")
        await mount(coordinator, config)
        session = cls(coordinator, coordinator.get("context"))

        async def capture(event: str, data: dict[str, Any]) -> HookResult:
            session.events.append((event, data))
            return HookResult(action="continue")

        for name in CAPTURED:
            coordinator.hooks.register(name, capture, name=f"capture-{name}")
        return session

    def named(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == event]

    @property
    def budget(self) -> dict[str, Any]:
        return self.named("context:budget")[-1]

    async def respond(self, tokens: int) -> None:
        usage = {"input_tokens": tokens, "cache_write_tokens": 0}
        await self.coordinator.hooks.emit("llm:response", {"usage": usage})

    async def read_file(self, tokens: int) -> None:
        """One tool round whose result estimates at about ``tokens``."""
        await self.manager.add_message(tool_round(self.rounds, tokens)[0])
        await self.manager.add_message(tool_round(self.rounds, tokens)[1])
        self.rounds += 1

    async def view(self, provider: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        view = await self.manager.get_messages_for_request(provider=provider, **kwargs)
        assert check_view(view, history=self.manager.messages) == []
        return view

    def carried(self, view: Sequence[dict[str, Any]]) -> int:
        """What a request with ``view`` carries: the view and the mounted tools."""
        return estimate(view) + self.budget["tool_definitions_tokens"]


class Counter:
    """An orchestrator's ``count_view``: our estimate of the view plus ``extra`` tokens."""

    def __init__(self, limit: int, extra: int = 0) -> None:
        self.limit, self.extra = limit, extra

    async def __call__(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = estimate(view) + self.extra
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": self.limit,
                "measurement": {"kind": "provider_count", "source": "t", "input_tokens": tokens},
            },
        }


def estimate(view: Sequence[dict[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


#: Estimated tokens of one log line (the estimator's figure, measured once).
LINE_TOKENS = 20


def tool_round(number: int, tokens: int) -> list[dict[str, Any]]:
    call_id = f"read_{number}"
    line = f"{number:05d} the build log line of module {number}, with a count and a path\n"
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "tool": "read", "arguments": {"n": number}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": line * (tokens // LINE_TOKENS)},
    ]


def history_of(rounds: int, tokens: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every build log."}]
    for number in range(rounds):
        messages += tool_round(number, tokens)
    return messages


# --- 1. a slope from injection noise -------------------------------------------------------------


@pytest.mark.parametrize("hard_fit", [False, True])
async def test_a_shrinking_reminder_teaches_no_slope(hard_fit: bool) -> None:
    """A session-start reminder that shrinks from 2,000 to 500 tokens between two small early
    requests does not make the meter believe growth costs a quarter of its estimate."""
    session = await Session.start(tool_words=2_000, token_meter="actual")
    provider = Provider(200_000, 64_000)
    await session.manager.add_message({"role": "user", "content": "Read every build log."})
    await session.read_file(8_000)
    view = await session.view(provider)
    await session.respond(session.carried(view) + 2_000)
    await session.read_file(1_700)
    view = await session.view(provider)
    await session.respond(session.carried(view) + 500)
    for _ in range(6):
        await session.read_file(24_500)  # ~147,000 estimated tokens of file reads
    if hard_fit:
        view = await session.manager.get_messages_for_request_retaining(
            retain_contents=[], provider=provider, hard_fit=True
        )
    else:
        view = await session.view(provider)
    assert estimate(view) > 140_000 or session.named("context:compaction")
    real = session.carried(view) + 500
    assert real + 64_000 <= 200_000, f"{real} input + 64,000 output on a 200,000 window"


# --- 2. an explicit budget's reading ------------------------------------------------------------


async def test_an_explicit_budget_s_reading_does_not_teach_the_tools_as_overhead() -> None:
    session = await Session.start(tool_words=3_000)
    provider = Provider(128_000, 8_000)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Read every build log."})
    await session.view(provider)
    tools = session.budget["tool_definitions_tokens"]
    assert tools > 20_000
    view = await session.view(provider, token_budget=50_000)  # holds back no tools
    assert session.budget["tool_definitions_tokens"] == 0
    await session.respond(estimate(view) + tools)  # the request carried the tools
    for _ in range(9):
        await session.read_file(8_000)
    view = await session.view(provider)
    assert session.budget["learned_overhead_tokens"] < OVERHEAD_STEP, session.budget
    assert 70_000 < estimate(view) < 128_000 - 8_000 - 4_096 - tools - 800
    assert manager.compaction_level == 0, "a view that fits is not compacted"


async def test_an_explicit_budget_is_the_view_s_and_its_reading_is_compared_with_the_request() -> (
    None
):
    """In actual mode the explicit request's reading (the view and the tools) is compared with
    the explicit budget plus the tools it carried, not with the explicit budget alone."""
    session = await Session.start(tool_words=3_000, token_meter="actual")
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Read every build log."})
    await session.read_file(20_000)
    view = await session.view(Provider(128_000, 8_000))
    tools = session.budget["tool_definitions_tokens"]
    await session.respond(estimate(view) + tools)
    await session.read_file(2_000)
    view = await session.view(token_budget=40_000)
    assert estimate(view) < 40_000 < estimate(view) + tools
    assert manager.compaction_level == 0, "the view fits the caller's budget"
    assert session.budget["request_budget"] >= 40_000 + tools


# --- 3. a side call before the first view after a resume ----------------------------------------


async def test_a_side_call_before_the_first_view_after_a_resume_answers_nothing() -> None:
    session = await Session.start(tool_words=2_000, token_meter="actual")
    provider = Provider(200_000, 64_000)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "hello"})
    view = await session.view(provider)
    await session.respond(session.carried(view))
    resumed = history_of(20, 8_000)
    assert estimate(resumed) > 155_000
    await manager.set_messages(resumed)
    await session.respond(900)  # a summariser's side call
    view = await session.view(provider)
    assert session.carried(view) + 64_000 <= 200_000


# --- 4. one inflated reading ---------------------------------------------------------------------


async def test_one_inflated_reading_is_reported_and_not_learned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = await Session.start(tool_words=500)
    provider = Provider(272_000, 128_000)
    manager = session.manager
    for message in history_of(30, 2_000):
        await manager.add_message(message)
    assert len(manager.messages) == 61
    view = await session.view(provider)
    with caplog.at_level(logging.WARNING):
        await session.respond(900_000)  # summed over internal calls, or server-held history
        view = await session.view(provider)
    assert manager.compaction_level == 0 and len(view) == 61
    assert session.budget["learned_overhead_tokens"] == 0
    [rejected] = session.named("context:reading_rejected")
    assert rejected["reading_tokens"] == 900_000
    assert rejected["carried_tokens"] == session.carried(view)
    assert rejected["input_room"] == 272_000 - 128_000 - 4_096
    [warning] = [r.getMessage() for r in caplog.records if "summed usage" in r.getMessage()]
    assert "server-held history or summed usage?" in warning
    assert "900,000" in warning
    # The next readings put the overhead back where it was: nothing was decided on the first.
    for _ in range(3):
        await session.respond(session.carried(view) + 512)
        view = await session.view(provider)
    assert session.budget["learned_overhead_tokens"] == 512
    assert manager.compaction_level == 0


async def test_an_inflated_reading_that_later_readings_confirm_becomes_overhead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = await Session.start()
    provider = Provider(272_000, 128_000)
    manager = session.manager
    for message in history_of(5, 2_000):
        await manager.add_message(message)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # the provider chains a server-side history on every request
            view = await session.view(provider)
            await session.respond(session.carried(view) + 300_000)
        await session.view(provider)
    assert len(session.named("context:reading_rejected")) == 1
    assert session.budget["learned_overhead_tokens"] >= 272_000 - 128_000 - 4_096
    assert any("no view can fit" in r.getMessage() for r in caplog.records)


async def test_the_inflated_reading_warning_is_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = await Session.start()
    provider = Provider(272_000, 128_000)
    await session.manager.add_message({"role": "user", "content": "hello"})
    with caplog.at_level(logging.WARNING):
        for _ in range(20):  # every other reading inflated: each one rejected, never confirmed
            view = await session.view(provider)
            await session.respond(900_000)
            view = await session.view(provider)
            await session.respond(session.carried(view))
        await session.view(provider)
    warned = [r for r in caplog.records if "summed usage" in r.getMessage()]
    assert len(session.named("context:reading_rejected")) == 20
    assert 1 <= len(warned) <= 5, "a handful of lines for twenty rejections"


async def test_a_reading_just_above_the_room_is_believed_at_once() -> None:
    """Above the whole input room but less than twice what the request carried: the estimator
    under-counted (that is what readings are for), not a summed or server-held figure."""
    session = await Session.start(token_meter="actual")
    provider = Provider(200_000, 64_000)
    manager = session.manager
    for message in history_of(56, 2_000):
        await manager.add_message(message)
    view = await session.view(provider)
    room = session.budget["request_budget"]
    assert session.carried(view) < room < 1.3 * session.carried(view)
    await session.respond(int(1.3 * session.carried(view)))
    await session.view(provider)
    assert session.named("context:reading_rejected") == []
    assert manager.compaction_level > 0, "the reading is over the trigger: compacted"


async def test_an_explicit_request_s_reading_is_judged_against_what_it_could_hold() -> None:
    """An explicit budget is the view's: the request could hold it plus the tools, so a reading
    between the two is possible and believed."""
    session = await Session.start(tool_words=3_000)
    manager = session.manager
    await manager.add_message({"role": "user", "content": "Read every build log."})
    await session.view(Provider(128_000, 8_000))
    tools = session.budget["tool_definitions_tokens"]
    view = await session.view(token_budget=30_000)
    reading = 30_000 + tools * 4 // 5
    assert reading > 2 * (estimate(view) + tools)
    await session.respond(reading)
    await session.view(token_budget=30_000)
    assert session.named("context:reading_rejected") == []


# --- 5. decisions made under a budget later readings disproved -----------------------------------


def test_a_room_is_disproved_only_by_one_clearly_larger() -> None:
    assert DISPROVED_SHARE == 0.25
    assert not disproved(None, 100_000), "no decisions, nothing to disprove"
    assert not disproved(75_000, 100_000) and disproved(74_999, 100_000)
    assert not disproved(100_000, 50_000), "a smaller room never disproves"
    assert not disproved(0, 0) and disproved(0, 1)


def test_decisions_built_on_others_keep_the_smallest_room_they_were_made_under() -> None:
    assert made_under(None, 80_000, rebased=False) == 80_000
    assert made_under(60_000, 75_000, rebased=False) == 60_000, "a slow creep hides nothing"
    assert made_under(60_000, 50_000, rebased=False) == 50_000
    assert made_under(60_000, 90_000, rebased=True) == 90_000, "made afresh"


async def test_decisions_made_under_a_disproved_budget_do_not_outlive_the_next_escalation() -> None:
    session = await Session.start()
    provider = Provider(272_000, 128_000)
    manager = session.manager
    for message in history_of(19, 2_000):
        await manager.add_message(message)
    view = await session.view(provider)
    # Within the room, so believed: usage summed over two internal calls, say.
    await session.respond(session.carried(view) + 100_000)
    await session.view(provider)
    [bad] = session.named("context:compaction")
    made_under = manager.decisions
    assert made_under.removed or made_under.truncated
    # The next readings put the overhead back at nothing: that budget was wrong.
    for _ in range(2):
        view = await session.view(provider)
        await session.respond(session.carried(view))
    assert session.budget["learned_overhead_tokens"] == 0
    assert bad["budget"] < session.budget["effective_budget"] / 2
    rounds = 0
    while len(session.named("context:compaction")) == 1:
        await session.read_file(4_000)
        view = await session.view(provider)
        await session.respond(session.carried(view))
        rounds += 1
        assert rounds < 60
    event = session.named("context:compaction")[-1]
    decisions = manager.decisions
    assert set(event["removed_positions"]) == set(decisions.removed)
    assert set(event["truncated_positions"]) == set(decisions.truncated)
    assert set(event["stubbed_positions"]) == set(decisions.stubbed)
    # Started afresh, the escalation walked the rungs from the whole view's size, down to
    # its target (notice aside), not from the size the disproved decisions had left.
    # Started afresh, it walks the rungs from the whole view's size down to its target, not
    # from the size the disproved decisions had left (it would stop early, above the target).
    assert event["after_tokens"] <= event["target_tokens"]


async def test_a_resume_forgets_the_room_the_old_decisions_were_made_under() -> None:
    """After ``set_messages`` nothing decided about the old history is in force, so nothing can
    be disproved: the second escalation of the resumed session builds on the first."""
    session = await Session.start()
    provider = Provider(272_000, 128_000)
    manager = session.manager
    for message in history_of(19, 2_000):
        await manager.add_message(message)
    view = await session.view(provider)
    await session.respond(session.carried(view) + 100_000)  # believed, and far too high
    await session.view(provider)
    assert len(session.named("context:compaction")) == 1
    for _ in range(2):
        view = await session.view(provider)
        await session.respond(session.carried(view))
    await manager.set_messages(await manager.get_messages())
    rounds = 0
    while len(session.named("context:compaction")) < 3:
        await session.read_file(4_000)
        view = await session.view(provider)
        await session.respond(session.carried(view))
        rounds += 1
        assert rounds < 80
    first, second = session.named("context:compaction")[1:]
    assert first["removed_positions"] or first["truncated_positions"]
    decisions = manager.decisions
    added = set(second["removed_positions"]) | set(second["truncated_positions"])
    assert added < set(decisions.removed) | set(decisions.truncated), "built on the first"


async def test_the_measured_path_escalates_afresh_over_decisions_a_count_disproved() -> None:
    session = await Session.start(token_meter="actual")
    provider = Provider(200_000, 64_000)
    manager = session.manager
    for message in history_of(30, 2_000):
        await manager.add_message(message)
    view = await session.view(provider)
    # Believed (within the room), and far too high: the next request escalates under it.
    await session.respond(session.carried(view) + 55_000)
    await session.read_file(8_000)
    await session.view(provider)
    assert len(session.named("context:compaction")) == 1
    made_under = manager.decisions
    for _ in range(32):
        await session.read_file(4_000)

    count_view = Counter(200_000 - 64_000)  # the orchestrator's count: no overhead at all
    measured = session.coordinator.get_capability("context.measured_request_view")
    result = await measured(provider=provider, retain_contents=[], count_view=count_view)
    assert result["outcome"] == "target_reached", result["outcome"]
    assert await result["transaction"].commit()
    event = session.named("context:compaction")[-1]
    decisions = manager.decisions
    assert decisions is not made_under
    assert set(event["removed_positions"]) == set(decisions.removed)
    assert set(event["truncated_positions"]) == set(decisions.truncated)
    # Made afresh under the room the count showed, those decisions stand: the next measured
    # escalation builds on them instead of starting over again.
    rounds = 0
    while len(session.named("context:compaction")) < 3:
        await session.read_file(4_000)
        result = await measured(provider=provider, retain_contents=[], count_view=count_view)
        assert await result["transaction"].commit()
        rounds += 1
        assert rounds < 80
    added = session.named("context:compaction")[-1]
    decisions = manager.decisions
    step = set(added["removed_positions"]) | set(added["truncated_positions"])
    assert step < set(decisions.removed) | set(decisions.truncated), "built on the fresh ones"


async def test_a_measured_escalation_on_standing_decisions_keeps_their_smallest_room() -> None:
    """Built on decisions in force, a measured escalation keeps the smallest room any of them
    was made under: a later count that disproves that room, though not the newest one,
    starts the walk afresh."""
    session = await Session.start(token_meter="actual")
    provider = Provider(200_000, 64_000)
    manager = session.manager
    for message in history_of(30, 2_000):
        await manager.add_message(message)
    count_view = Counter(200_000 - 64_000)
    measured = session.coordinator.get_capability("context.measured_request_view")
    await session.view(provider)
    reported: list[bool] = []
    budget = 0
    overheads = (40_000, 30_000, 5_000)
    for overhead in overheads:
        count_view.extra = overhead  # a reminder the orchestrator adds to every request
        while True:
            result = await measured(provider=provider, retain_contents=[], count_view=count_view)
            assert await result["transaction"].commit()
            if result["outcome"] != "not_needed":
                break
            await session.read_file(4_000)
        assert result["outcome"] == "target_reached", result["outcome"]
        budget = result["policy_budget"]
        decisions = manager.decisions
        # What the escalation reports is what it decided: all in force when made afresh,
        # only what it added when built on the decisions in force.
        event = session.named("context:compaction")[-1]
        reported.append(set(event["removed_positions"]) == set(decisions.removed))
    # The rooms, about: the second does not disprove the first; the third disproves the
    # first, not the second.
    first_room, second_room, third_room = (budget - o for o in overheads)
    assert not disproved(first_room, second_room)
    assert disproved(first_room, third_room) and not disproved(second_room, third_room)
    assert reported == [True, False, True], "fresh, built on the first, fresh again"
