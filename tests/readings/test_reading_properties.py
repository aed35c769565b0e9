"""Generated sessions whose readings lie (issue 28, section 1), on a real kernel coordinator.

A session is prompts, tool rounds and answers; before every assistant message the driver asks
for a view, like an orchestrator: mostly with the provider's window, sometimes with its own
``token_budget``, sometimes as a hard fit. The provider counts the view exactly as our
estimator does plus the mounted tools plus a hook injection that moves between requests (the
noise: up to 3,000 tokens either way, inside the 4,096-token safety margin). Its readings are
sometimes summed over internal calls (two or three times the request), sometimes inflated far
past the window (a server-held history, a corrupt figure), sometimes missing; side calls
answer after the real response, and the session is now and then resumed (``set_messages``)
with a side call before its first view. In both meter modes:

* no request exceeds the window with the output the provider asks for (the generator keeps
  the floor, the tools, the injection and the output inside every window, so every request
  can fit);
* no decision made under a later-disproved budget outlives the next escalation: once the
  room (the budget in estimate units: the effective budget, or in actual mode the request
  budget through the size model the meter statistics report) is more than twice the smallest
  room the decisions in force were made under, the next escalation's ``context:compaction``
  reports every decision in force as its own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.models import HookResult, ModelInfo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import check_view, estimate_message_tokens, mount
from amplifier_module_context_simple.readings._reading_gate import (
    IMPLAUSIBLE_FACTOR,
    ReadingGate,
    implausible,
)
from amplifier_module_context_simple.readings._size_model import SizeModel
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions

LINE = "line 42: compiled module_7 in 3.4s; warning W12 at src/app/models.py:17 (unused)\n"
LINE_TOKENS = estimate_message_tokens({"role": "tool", "content": LINE * 100}) / 100
#: The provider's injections move within this many tokens of their base (inside the margin).
NOISE = 3_000


class Tool:
    def __init__(self, name: str, words: int) -> None:
        self.name = name
        self.description = " ".join(f"{name}-detail{i}" for i in range(words))
        self.input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}


class Provider:
    def __init__(self, window: int, output: int) -> None:
        self.window, self.output = window, output

    async def get_model_info(self) -> ModelInfo:
        return ModelInfo(
            id="noisy",
            display_name="Noisy",
            context_window=self.window,
            max_output_tokens=self.output,
            defaults={"max_tokens": self.output},
        )


@dataclass
class Request:
    """One request and what the provider does around it."""

    kind: str  # "provider", "explicit" or "hard_fit"
    reading: str  # "exact", "summed", "inflated" or "none"
    injection: int
    side_after: bool
    resume_before: bool


@dataclass
class Session:
    window: int
    output: int
    tool_words: int
    injection: int
    token_meter: str
    rounds: list[list[int]]  # per turn, the result sizes of its tool rounds
    requests: list[Request] = field(default_factory=list[Request])


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    window = draw(st.sampled_from([64_000, 128_000, 200_000, 272_000]))
    turns = draw(st.integers(1, 4))
    rounds = [
        draw(st.lists(st.integers(500, 8_000), min_size=1, max_size=10)) for _ in range(turns)
    ]
    session = Session(
        window=window,
        output=draw(st.integers(window // 32, window // 4)),
        tool_words=draw(st.integers(0, window // 48)),
        injection=draw(st.integers(0, 6_000)),
        token_meter=draw(st.sampled_from(["estimate", "actual"])),
        rounds=rounds,
    )
    # One request before every assistant message: each round's call, and each turn's answer.
    for _ in range(sum(len(r) + 1 for r in rounds)):
        session.requests.append(
            Request(
                kind=draw(st.sampled_from(["provider"] * 6 + ["explicit", "hard_fit"])),
                reading=draw(st.sampled_from(["exact"] * 6 + ["summed", "inflated", "none"])),
                injection=draw(st.integers(0, NOISE)),
                side_after=draw(st.integers(0, 4)) == 4,
                resume_before=draw(st.integers(0, 9)) == 9,
            )
        )
    return session


def tokens(view: list[dict[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


def room_of(token_meter: str, meter_stats: dict[str, Any], budget: dict[str, Any]) -> int:
    """The room the planner compared, in estimate units (``RequestPlan.room``)."""
    if token_meter == "actual" and meter_stats["source"] == "actual":
        model = SizeModel(meter_stats["overhead"], meter_stats["calibration_ratio"])
        return model.to_estimate(budget["request_budget"])
    return budget["effective_budget"]


async def drive(session: Session) -> list[str]:
    """Run ``session``; the problems found, in order."""
    kernel = AmplifierSession({"session": {"orchestrator": "none", "context": "none"}})
    coordinator = kernel.coordinator
    tool = Tool("delegate", session.tool_words)
    if session.tool_words:
        await coordinator.mount("tools", tool, name="delegate")
    events: list[tuple[str, dict[str, Any]]] = []

    async def capture(event: str, data: dict[str, Any]) -> HookResult:
        events.append((event, data))
        return HookResult(action="continue")

    for name in ("context:budget", "context:compaction"):
        coordinator.hooks.register(name, capture, name=f"capture-{name}")
    await mount(coordinator, {"token_meter": session.token_meter})
    manager = coordinator.get("context")
    provider = Provider(session.window, session.output)
    tools = estimate_tool_definitions([tool], None) if session.tool_words else 0
    problems: list[str] = []
    made_under: int | None = None  # the smallest room the decisions in force were made under
    requests = iter(session.requests)
    serial = 0

    async def respond(input_tokens: int) -> None:
        usage = {"input_tokens": input_tokens, "cache_write_tokens": 0}
        await coordinator.hooks.emit("llm:response", {"usage": usage})

    async def request(number: int) -> None:
        nonlocal made_under
        plan = next(requests)
        if plan.resume_before:
            await manager.set_messages(await manager.get_messages())
            made_under = None
            await respond(700)  # a side call before the first view of the resumed history
        injection = session.injection + plan.injection
        compactions = len([e for e, _ in events if e == "context:compaction"])
        explicit = None
        if plan.kind == "explicit":
            explicit = session.window - session.output - tools - session.injection - 12_000
            view = await manager.get_messages_for_request(token_budget=explicit)
        elif plan.kind == "hard_fit":
            try:
                view = await manager.get_messages_for_request_retaining(
                    retain_contents=[], provider=provider, hard_fit=True
                )
            except ContextLengthError:
                return  # refused: nothing goes out (readings believed may say it cannot fit)
        else:
            view = await manager.get_messages_for_request(provider=provider)
        budget = [d for e, d in events if e == "context:budget"][-1]
        if explicit is None:
            assert budget["tool_definitions_tokens"] == tools
        if violations := check_view(view, history=manager.messages):
            problems.append(f"request {number}: {violations[:2]}")
        real = tokens(view) + tools + injection
        if real + session.output > session.window:
            problems.append(
                f"request {number} ({plan.kind}): {real} input + {session.output} output "
                f"> {session.window}"
            )
        new = [d for e, d in events if e == "context:compaction"][compactions:]
        if new:
            room = room_of(session.token_meter, manager.token_meter_stats, budget)
            decisions = manager.decisions
            [event] = new
            own = (
                set(event["removed_positions"]) == set(decisions.removed)
                and set(event["truncated_positions"]) == set(decisions.truncated)
                and set(event["stubbed_positions"]) == set(decisions.stubbed)
            )
            if made_under is not None and room > 2 * made_under and not own:
                problems.append(
                    f"request {number}: decisions made under a room of {made_under} outlived "
                    f"an escalation at a room of {room}"
                )
            made_under = room if own or made_under is None else min(made_under, room)
        if plan.reading == "exact":
            await respond(real)
        elif plan.reading == "summed":
            await respond(real * (2 + number % 2))
        elif plan.reading == "inflated":
            await respond(real + 3 * session.window)
        if plan.side_after:
            await respond(900)

    await manager.add_message({"role": "user", "content": "Read the build logs, module by module."})
    number = 0
    for turn, sizes in enumerate(session.rounds):
        if turn:
            await manager.add_message({"role": "user", "content": f"Now part {turn}, please."})
        for size in sizes:
            await request(number)
            number += 1
            call_id = f"call_{serial}"
            serial += 1
            await manager.add_message(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": call_id, "tool": "read", "arguments": {"n": serial}}],
                }
            )
            content = LINE * max(1, int(size / LINE_TOKENS))
            await manager.add_message({"role": "tool", "tool_call_id": call_id, "content": content})
        await request(number)
        number += 1
        await manager.add_message({"role": "assistant", "content": f"Part {turn} is done."})
    return problems


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sessions())
def test_lying_readings_never_send_a_request_over_the_window_nor_keep_disproved_decisions(
    session: Session,
) -> None:
    assert asyncio.run(drive(session)) == []


@given(st.lists(st.booleans(), max_size=30))
def test_an_implausible_reading_is_believed_only_right_after_a_rejected_one(
    implausible_readings: list[bool],
) -> None:
    # A confirmation is spent on the reading it believes: the next implausible reading is
    # rejected again, and a plausible reading in between confirms nothing.
    gate = ReadingGate()
    room, carried = 10_000, 1_000
    previous_rejected = False
    for is_implausible in implausible_readings:
        reading = room + 1 if is_implausible else carried
        believed = gate.admit(reading, carried, room, report=False)
        assert believed == (not is_implausible or previous_rejected)
        previous_rejected = not believed


def test_rejections_are_warned_at_the_1st_2nd_4th_8th_and_so_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = ReadingGate()
    with caplog.at_level(logging.DEBUG, logger="amplifier_module_context_simple"):
        for k in range(20):  # every other reading implausible: each one rejected
            assert not gate.admit(900_000 + k, 1_000, 10_000, report=True)
            assert gate.admit(1_000, 1_000, 10_000, report=True)
    lines = [r for r in caplog.records if "summed usage" in r.getMessage()]
    assert [r.levelno == logging.WARNING for r in lines] == [
        k in (1, 2, 4, 8, 16) for k in range(1, 21)
    ]
    assert lines[3].getMessage() == (
        "context-simple: the provider reported 900,003 input tokens for a request that carried "
        "~1,000 and could hold at most 10,000: server-held history or summed usage? The reading "
        "is not used until the next one confirms it (4 rejected so far)"
    )
    assert [r.rejections for r in gate.take()] == list(range(1, 21))
    assert gate.take() == ()


@given(st.integers(0, 10**12), st.integers(0, 10**9))
def test_a_reading_is_implausible_only_against_a_known_request_and_room(
    reading: int, known: int
) -> None:
    assert not implausible(reading, None, known)
    assert not implausible(reading, known, None)
    assert not implausible(reading, None, None)
    above = reading > known and reading > IMPLAUSIBLE_FACTOR * known
    assert implausible(reading, known, known) == above


@pytest.mark.parametrize(
    ("reading", "carried", "room", "rejected"),
    [
        (10_000, 1_000, 10_000, False),  # exactly the room: the request could hold it
        (10_001, 1_000, 10_000, True),
        (2_000, 1_000, 1_500, False),  # exactly the factor times what was carried
        (2_001, 1_000, 1_500, True),
    ],
)
def test_a_reading_at_either_bound_is_believed_and_one_token_over_both_is_not(
    reading: int, carried: int, room: int, *, rejected: bool
) -> None:
    # Both bounds are strict: the estimator may be a little off and the room is a hard cap.
    assert implausible(reading, carried, room) == rejected
    assert ReadingGate().admit(reading, carried, room, report=False) == (not rejected)
