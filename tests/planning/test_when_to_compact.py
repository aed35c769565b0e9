"""When to compact: at a turn's start, on a cold cache, and the same on a resume.

Every escalation edits the prompt prefix; where it lands decides what it costs (a cache
rewrite, and on thinking-bound models the reasoning after the edit). These tests drive
managers with a real ``HookRegistry`` and an injected clock (never a sleep).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from amplifier_core import AmplifierSession, HookRegistry, HookResult
from hypothesis import given

from amplifier_module_context_simple import (
    ContextConfig,
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
    mount,
)
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.planning._timing import FIRST_TURN_GROWTH_SHARE, moment_of
from amplifier_module_context_simple.vocabulary._public import REFERENCE_ONLY_KEY, answers_a_request

from ..conftest import CORPUS_DIR
from ..provider_rules import provider_violations
from ..replay.cli_runs import run, run_json
from ..test_provider_views import PROPERTY_SETTINGS, Session, WindowProvider, sessions

BUDGET = 8_000
DEFAULT_DISTANCE = ContextConfig().cold_cache_distance
OUTPUT = "compiled module; warning W12 at src/app/models.py:17 (unused import)\n"


class Clock:
    """An injected clock: admission reads it, the test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Compactions:
    """The ``context:compaction`` payloads a real hook registry delivered."""

    def __init__(self) -> None:
        self.hooks = HookRegistry()
        self.payloads: list[dict[str, Any]] = []

        async def record(event: str, data: dict[str, Any]) -> HookResult:
            self.payloads.append(dict(data))
            return HookResult(action="continue")

        self.hooks.register("context:compaction", record, name="when-to-compact")


def thinking_round(turn: int, rnd: int, lines: int) -> list[dict[str, Any]]:
    """One tool round of a thinking model: a signed thinking block, a call, its result."""
    call = f"call_{turn}_{rnd}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"Turn {turn}, step {rnd}.", "signature": "s"},
                {"type": "text", "text": "Running the build."},
            ],
            "tool_calls": [{"id": call, "tool": "bash", "arguments": {"command": f"make {rnd}"}}],
        },
        {"role": "tool", "tool_call_id": call, "content": OUTPUT * lines},
    ]


async def drive_turns(
    manager: SimpleContextManager,
    turns: int,
    *,
    rounds: int = 2,
    lines: int = 12,
    clock: Clock | None = None,
    pause_before_prompt: float = 0.0,
) -> list[tuple[bool, int]]:
    """Run ``turns`` prompts of ``rounds`` tool rounds each, asking for a view before every
    assistant message as an orchestrator does; returns (at a turn start, compactions so far)
    per request."""
    requests: list[tuple[bool, int]] = []
    for turn in range(turns):
        if clock is not None:
            clock.advance(pause_before_prompt)
        await manager.add_message({"role": "user", "content": f"Prompt {turn}: build part {turn}."})
        messages = [m for r in range(rounds) for m in thinking_round(turn, r, lines)]
        messages.append({"role": "assistant", "content": f"Part {turn} is built."})
        first = True
        for message in messages:
            if message["role"] == "assistant":
                await manager.get_messages_for_request(token_budget=BUDGET)
                requests.append((first, manager.decisions.escalations))
                first = False
            if clock is not None:
                clock.advance(2)
            await manager.add_message(message)
    return requests


def escalated_at(requests: list[tuple[bool, int]]) -> list[bool]:
    """For each request that escalated: was it a turn's first request?"""
    out: list[bool] = []
    before = 0
    for first, count in requests:
        if count > before:
            out.append(first)
        before = count
    return out


# ------------------------------------------------------------------ the turn-start rule


async def test_escalations_land_at_turn_starts() -> None:
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    requests = await drive_turns(manager, 14)
    where = escalated_at(requests)
    assert len(where) >= 2, "the session compacts more than once"
    assert all(where), f"every escalation at a turn's first request: {where}"
    assert {p["reason"] for p in seen.payloads} <= {"turn_start"}
    assert all(p["at_turn_start"] for p in seen.payloads)


async def test_without_the_rule_escalations_land_inside_the_tool_loop() -> None:
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks, escalate_at_turn_start=False)
    requests = await drive_turns(manager, 14)
    where = escalated_at(requests)
    assert where and not any(where), f"the threshold fires mid-turn: {where}"
    assert {p["reason"] for p in seen.payloads} == {"threshold"}
    assert not any(p["at_turn_start"] for p in seen.payloads)


async def test_the_rule_costs_at_most_one_more_escalation() -> None:
    timed = SimpleContextManager()
    plain = SimpleContextManager(escalate_at_turn_start=False)
    for rounds in (2, 4):
        with_rule = escalated_at(await drive_turns(timed, 16, rounds=rounds))
        without = escalated_at(await drive_turns(plain, 16, rounds=rounds))
        assert len(with_rule) <= len(without) + 1
        await timed.clear()
        await plain.clear()


async def test_a_turn_that_needs_more_room_than_the_target_leaves_aims_lower() -> None:
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    # Four rounds of large results: a turn brings more than trigger - target.
    await drive_turns(manager, 6, rounds=4, lines=25)
    turn_starts = [p for p in seen.payloads if p["reason"] == "turn_start"]
    assert turn_starts
    usable = turn_starts[0]["budget"]
    ordinary = int(manager.config.target_usage * usable)
    assert all(p["target_tokens"] < ordinary for p in turn_starts)


async def test_a_turn_start_that_cannot_make_room_for_the_turn_does_not_escalate() -> None:
    # The system prompt is on the floor and takes about half the room: with a turn's
    # growth on top, no escalation at a turn start can bring the view below the trigger, so
    # the turn escalates inside its loop whatever is done at its start.
    system = "You are a build agent. Follow the house rules for every change. " * 180
    runs: dict[bool, Compactions] = {}
    for rule in (True, False):
        seen = runs[rule] = Compactions()
        manager = SimpleContextManager(hooks=seen.hooks, escalate_at_turn_start=rule)
        await manager.add_message({"role": "system", "content": system})
        await drive_turns(manager, 8, lines=65)
    assert len(runs[False].payloads) >= 5, "the session compacts inside its loops"
    reasons = [p["reason"] for p in runs[True].payloads]
    assert "turn_start" not in reasons
    assert len(reasons) <= len(runs[False].payloads)


async def test_a_turn_start_over_the_trigger_makes_room_for_the_turn() -> None:
    # The view is over the trigger when a turn starts: that escalation cannot wait, and it
    # aims as a turn-start one does (the latest results belong to finished turns), so the
    # turn runs its loop without another edit. Aimed at the ordinary target instead, every
    # turn escalates once more inside its loop.
    system = "You are a build agent. Follow the house rules for every change. " * 160
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    await manager.add_message({"role": "system", "content": system})
    await drive_turns(manager, 8, lines=65)
    assert len(seen.payloads) >= 5
    assert all(p["reason"] == "threshold" for p in seen.payloads)
    assert all(p["at_turn_start"] for p in seen.payloads), [
        p["history_messages"] for p in seen.payloads
    ]


async def test_the_compaction_event_counts_the_thinking_after_the_edit() -> None:
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    await drive_turns(manager, 10)
    assert seen.payloads
    for payload in seen.payloads:
        edited = min(
            payload["removed_positions"]
            + payload["truncated_positions"]
            + payload["stubbed_positions"]
        )
        history = manager.messages[: payload["history_messages"]]
        shown_after = [
            m
            for p, m in enumerate(history)
            if p >= edited and p not in manager.decisions.removed and m["role"] == "assistant"
        ]
        expected = sum(
            1
            for m in shown_after
            for b in m["content"]
            if isinstance(b, dict) and b["type"] == "thinking"
        )
        assert payload["thinking_blocks_after_edit"] == expected


@pytest.mark.parametrize(("answered", "starts"), [(True, True), (False, False)])
async def test_a_prompt_merged_into_a_tool_round_does_not_start_a_turn(
    answered: bool, starts: bool
) -> None:
    """A prompt typed right after a tool result joins that round's user turn: the provider
    reads the active turn on, so escalating there would cost its own reasoning."""
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Build everything."})
    for message in thinking_round(0, 0, 2):
        await manager.add_message(message)
    if answered:
        await manager.add_message({"role": "assistant", "content": "Built."})
    await manager.add_message({"role": "user", "content": "Also run the linter."})
    await manager.get_messages_for_request(token_budget=BUDGET)
    moment = moment_of(manager.planner.index, BUDGET)
    assert moment.turn_start is starts
    assert (moment.turn_growth > 0) is starts


@pytest.mark.parametrize(
    "after",
    [
        [],
        [{"role": "user", "content": "<system-reminder>lint: clean</system-reminder>",
          "metadata": {"source": "hook"}}],
        [{"role": "system", "content": "Answer briefly."}],
    ],
    ids=["alone", "then a hook note", "then a system message"],
)  # fmt: skip
@pytest.mark.parametrize("greeted", [True, False])
async def test_a_prompt_starts_a_turn_whatever_reminders_follow_it(
    after: list[dict[str, Any]], greeted: bool
) -> None:
    """The last prompt starts a turn even right after a greeting, and with a hook's note or a
    system message after it: neither is a message the model answers."""
    manager = SimpleContextManager()
    if greeted:
        await manager.add_message({"role": "assistant", "content": "Hello, what shall we do?"})
    else:
        await manager.add_message({"role": "user", "content": "Build everything."})
        await manager.add_message({"role": "assistant", "content": "Built."})
    await manager.add_message({"role": "user", "content": "Also run the linter."})
    for message in after:
        await manager.add_message(message)
    await manager.get_messages_for_request(token_budget=BUDGET)
    moment = moment_of(manager.planner.index, BUDGET)
    assert moment.turn_start is True
    assert moment.turn_cycle > 0


def _turn(prompt: str, reads: int) -> list[dict[str, Any]]:
    """A finished turn: its prompt, ``reads`` tool rounds of one read each, its answer."""
    turn: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for k in range(reads):
        call_id = f"{prompt[:8]}-{k}"
        turn.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "tool": "read"}]}
        )
        turn.append({"role": "tool", "tool_call_id": call_id, "content": OUTPUT * 20})
    return [*turn, {"role": "assistant", "content": "Done."}]


@pytest.mark.parametrize(
    ("reads", "expected"),
    [((8, 1, 1, 1), 1), ((1, 1, 8, 1), 8), ((1, 1, 1, 8), 8), ((0, 0, 0), 0), ((), None)],
)
async def test_a_turn_is_expected_to_grow_as_the_largest_of_the_last_three(
    reads: tuple[int, ...], expected: int | None
) -> None:
    manager = SimpleContextManager()
    for n, count in enumerate(reads):
        for message in _turn(f"Task number {n}.", count):
            await manager.add_message(message)
    await manager.add_message({"role": "user", "content": "The next task."})
    await manager.get_messages_for_request(token_budget=BUDGET)
    growth = moment_of(manager.planner.index, BUDGET).turn_growth
    if expected is None:  # no turn has finished: a share of the budget is assumed
        assert growth == math.ceil(FIRST_TURN_GROWTH_SHARE * BUDGET)
    else:
        one_read = sum(map(estimate_message_tokens, _turn("Task number 0.", 1)[1:3]))
        assert growth == expected * one_read


async def _growth_after(turns: list[dict[str, Any]]) -> int:
    manager = SimpleContextManager()
    for message in [*turns, {"role": "user", "content": "The next task."}]:
        await manager.add_message(message)
    await manager.get_messages_for_request(token_budget=BUDGET)
    return moment_of(manager.planner.index, BUDGET).turn_growth


async def test_display_rows_add_nothing_to_a_turn_s_growth() -> None:
    plain = _turn("Task number 0.", 3)
    shown = {"role": "assistant", "content": "Reading ...", "metadata": {REFERENCE_ONLY_KEY: True}}
    spread = [m for message in plain for m in (message, shown)]
    assert await _growth_after(spread) == await _growth_after(plain) > 0


async def test_an_unanswered_call_before_the_answer_grows_the_turn_the_answer_does_not() -> None:
    turn = _turn("Task number 0.", 1)
    unanswered = {"role": "assistant", "content": "", "tool_calls": [{"id": "lost", "tool": "ls"}]}
    interrupted = [*turn[:-1], unanswered, turn[-1]]
    grown = await _growth_after(interrupted) - await _growth_after(turn)
    assert grown == estimate_message_tokens(unanswered)


@pytest.mark.parametrize("emptied", ["fresh", "cleared", "set empty"])
async def test_a_manager_fed_one_message_at_a_time_escalates_in_the_open(emptied: str) -> None:
    """Its first request plans its own point (with an event): nothing is walked silently,
    whether the manager is new or was emptied first."""
    source = SimpleContextManager()
    await drive_turns(source, 10)
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    if emptied == "cleared":
        await manager.clear()
    elif emptied == "set empty":
        await manager.set_messages([])
    for message in await source.get_messages():
        await manager.add_message(copy.deepcopy(message))
    await manager.get_messages_for_request(token_budget=BUDGET)
    assert len(seen.payloads) == 1
    assert manager.decisions.escalations == 1


# ------------------------------------------------------------------ the cold-cache rule


async def _near_the_trigger(
    clock: Clock, answer_delay: float = 0, **config: Any
) -> tuple[SimpleContextManager, Compactions, dict[str, Any]]:
    """A session whose view sits between the cold-cache distance and the trigger, with a
    call in flight (so the next request is inside a tool loop, not at a turn start)."""
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks, clock=clock, **config)
    await manager.add_message({"role": "user", "content": "Build everything."})
    usable = manager.config.usable_budget(BUDGET)
    trigger = manager.config.trigger(BUDGET)
    low = trigger - DEFAULT_DISTANCE * usable
    turn = 0
    while True:
        for message in thinking_round(0, turn, 6):
            if message["role"] == "assistant":
                await manager.get_messages_for_request(token_budget=BUDGET)
            clock.advance(1)
            await manager.add_message(message)
        turn += 1
        view = await manager.get_messages_for_request(token_budget=BUDGET)
        size = sum(estimate_message_tokens(m) for m in view)
        if size >= low + 200:
            assert size < trigger, "the helper overshot: make the rounds smaller"
            break
    assert not seen.payloads, "nothing compacted on the way up"
    # One more round: the call goes out; its result comes back after `clock` moved.
    call, result = thinking_round(0, turn, 1)
    clock.advance(answer_delay)
    await manager.add_message(call)
    return manager, seen, result


async def _after_pause(seconds: float, **config: Any) -> Compactions:
    clock = Clock()
    manager, seen, result = await _near_the_trigger(clock, **config)
    clock.advance(seconds)
    await manager.add_message(result)
    await manager.get_messages_for_request(token_budget=BUDGET)
    return seen


async def test_a_cold_cache_escalates_a_view_near_the_trigger() -> None:
    seen = await _after_pause(301)
    assert [p["reason"] for p in seen.payloads] == ["cold_cache"]
    assert seen.payloads[0]["at_turn_start"] is False


async def test_a_warm_cache_waits_for_the_trigger() -> None:
    seen = await _after_pause(299)
    assert seen.payloads == []


async def test_a_slow_answer_is_not_an_idle_cache() -> None:
    """The idle time runs from the previous response: a model that took long to answer
    read the cache when the request went out, and its result arrived right after."""
    clock = Clock()
    manager, seen, result = await _near_the_trigger(clock, answer_delay=900)
    clock.advance(5)
    await manager.add_message(result)
    await manager.get_messages_for_request(token_budget=BUDGET)
    assert seen.payloads == []


@pytest.mark.parametrize(("ttl", "cold"), [(1, True), (2, False)])
async def test_a_one_second_cache_lifetime_is_a_lifetime(ttl: int, cold: bool) -> None:
    # Each message comes a second after the one before: a cache that lives one second has
    # expired at every request, one that lives two has not.
    clock = Clock()
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks, clock=clock, cache_ttl_seconds=ttl)
    await manager.add_message({"role": "user", "content": "Build everything."})
    for turn in range(40):
        for message in thinking_round(0, turn, 6):
            if message["role"] == "assistant":
                await manager.get_messages_for_request(token_budget=BUDGET)
            clock.advance(1)
            await manager.add_message(message)
    reasons = {p["reason"] for p in seen.payloads}
    assert reasons == ({"cold_cache"} if cold else {"threshold"})


async def test_a_zero_cache_lifetime_turns_the_rule_off() -> None:
    seen = await _after_pause(3_600, cache_ttl_seconds=0)
    assert seen.payloads == []


async def test_a_view_further_from_the_trigger_than_the_distance_waits() -> None:
    seen = await _after_pause(3_600, cold_cache_distance=0.01)
    assert seen.payloads == []


async def test_the_cold_cache_decision_is_read_from_the_history() -> None:
    clock = Clock()
    manager, seen, result = await _near_the_trigger(clock)
    clock.advance(900)
    await manager.add_message(result)
    live = await manager.get_messages_for_request(token_budget=BUDGET)
    assert [p["reason"] for p in seen.payloads] == ["cold_cache"]
    # A new process reads the stored history at another time entirely: same view.
    later = Clock()
    later.advance(86_400 * 30)
    resumed = SimpleContextManager(clock=later)
    await resumed.set_messages(copy.deepcopy(await manager.get_messages()))
    assert await resumed.get_messages_for_request(token_budget=BUDGET) == live


@pytest.mark.parametrize("value", [-1, "300", float("inf"), True])
def test_a_bad_cache_lifetime_is_refused_naming_the_key(value: object) -> None:
    with pytest.raises(ValueError, match="cache_ttl_seconds"):
        SimpleContextManager(cache_ttl_seconds=value)  # type: ignore[arg-type]


# ------------------------------------------------------------------ resumes


def _dumps(view: list[dict[str, Any]]) -> str:
    return json.dumps(view, sort_keys=True, default=str)


async def resumed_views_that_differ(
    messages: list[dict[str, Any]], budget: int, provider: Any = None, factory: str | None = None
) -> tuple[int, int]:
    live = SimpleContextManager()
    if factory is not None:
        await live.set_system_prompt_factory(lambda: factory)
    requests = differ = 0
    for position, message in enumerate(messages):
        if answers_a_request(message) and position > 0:
            stored = copy.deepcopy(await live.get_messages())
            resumed = SimpleContextManager()
            if factory is not None:
                await resumed.set_system_prompt_factory(lambda: factory)
            await resumed.set_messages(stored)
            if provider is not None:
                again = await resumed.get_messages_for_request(provider=provider)
                view = await live.get_messages_for_request(provider=provider)
            else:
                again = await resumed.get_messages_for_request(token_budget=budget)
                view = await live.get_messages_for_request(token_budget=budget)
            requests += 1
            differ += _dumps(view) != _dumps(again)
        try:
            await live.add_message(copy.deepcopy(message))
        except Exception:  # admission's own property: the requests so far count
            break
    return requests, differ


def _corpus() -> list[Path]:
    return sorted(CORPUS_DIR.glob("*.jsonl"))


@pytest.mark.skipif(not CORPUS_DIR.is_dir(), reason="needs ../shared/corpus")
@pytest.mark.parametrize("budget", [16_000, 32_000])
async def test_a_resume_over_the_corpus_sends_what_the_running_session_would(budget: int) -> None:
    logging.disable(logging.WARNING)
    try:
        requests = differ = 0
        for path in _corpus():
            messages = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            r, d = await resumed_views_that_differ(messages, budget)
            requests, differ = requests + r, differ + d
    finally:
        logging.disable(logging.NOTSET)
    assert requests > 200
    assert differ == 0


async def test_a_resumed_manager_reproduces_the_views_of_a_compacting_session() -> None:
    live = SimpleContextManager()
    await drive_turns(live, 12)
    assert live.decisions.escalations >= 2
    stored = copy.deepcopy(await live.get_messages())
    prompt = {"role": "user", "content": "One more part.", "metadata": {"timestamp": "x"}}
    await live.add_message(copy.deepcopy(prompt))
    view = await live.get_messages_for_request(token_budget=BUDGET)
    resumed = SimpleContextManager()
    await resumed.set_messages(stored)
    await resumed.add_message(copy.deepcopy(prompt))
    assert _dumps(await resumed.get_messages_for_request(token_budget=BUDGET)) == _dumps(view)
    assert resumed.decisions.escalations == live.decisions.escalations


@PROPERTY_SETTINGS
@given(sessions())
def test_stopping_at_any_request_and_resuming_gives_the_same_next_view(session: Session) -> None:
    assert_every_resume_sends_the_running_view(session)


def assert_every_resume_sends_the_running_view(session: Session) -> None:
    """Stopped at each request of ``session`` and resumed, a manager sends the running view."""
    provider = WindowProvider(session.window, session.max_output) if session.via_provider else None
    logging.disable(logging.WARNING)
    try:
        requests, differ = asyncio.run(
            resumed_views_that_differ(
                session.messages, session.token_budget, provider, session.factory
            )
        )
    finally:
        logging.disable(logging.NOTSET)
    assert differ == 0, f"{differ} of {requests} resumed views differ"


def test_the_resume_walk_is_not_the_running_session() -> None:
    """A manager fed one message at a time plans its own points: nothing is walked again,
    so its compaction events are its own requests' (none are replayed silently)."""

    async def run() -> tuple[int, int]:
        seen = Compactions()
        manager = SimpleContextManager(hooks=seen.hooks)
        requests = await drive_turns(manager, 12)
        return len(seen.payloads), requests[-1][1]

    events, escalations = asyncio.run(run())
    assert events == escalations


# ------------------------------------------------------------------ the notice stays put


async def _ask_twice(session: Session) -> list[str]:
    """Every request of ``session`` asked twice in a row: what changed the second time."""
    seen = Compactions()
    manager = SimpleContextManager(hooks=seen.hooks)
    provider = WindowProvider(session.window, session.max_output) if session.via_provider else None
    problems: list[str] = []

    async def ask() -> list[dict[str, Any]]:
        if provider is not None:
            return await manager.get_messages_for_request(provider=provider)
        return await manager.get_messages_for_request(token_budget=session.token_budget)

    for position, message in enumerate(session.messages):
        if message["role"] == "assistant":
            first = _dumps(await ask())
            events = len(seen.payloads)
            again = _dumps(await ask())
            if len(seen.payloads) != events:
                problems.append(
                    f"request at {position}: asked again, it compacted: {seen.payloads[-1]}"
                )
            if again != first:
                problems.append(f"request at {position}: asked again, the view changed")
        try:
            await manager.add_message(copy.deepcopy(message))
        except Exception:  # admission's own property: the requests so far count
            break
    return problems


@PROPERTY_SETTINGS
@given(sessions())
def test_asking_again_with_nothing_new_changes_nothing(session: Session) -> None:
    """A request that adds nothing to the history is a sticky request: no escalation (a rung
    whose change mending undid is none), and so the notice cannot move."""
    logging.disable(logging.WARNING)
    try:
        problems = asyncio.run(_ask_twice(session))
    finally:
        logging.disable(logging.NOTSET)
    assert problems == []


# ------------------------------------------------------------------ the replay report


def test_the_replay_report_says_where_each_compaction_happened(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = []
    for turn in range(14):
        messages.append({"role": "user", "content": f"Prompt {turn}: build part {turn}."})
        messages += [m for r in range(2) for m in thinking_round(turn, r, 12)]
        messages.append({"role": "assistant", "content": f"Part {turn} is built."})
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    report = run_json("replay", str(transcript), "--max-tokens", str(BUDGET))
    compactions = report["compactions"]
    assert len(compactions) >= 2
    assert all(c["reason"] == "turn_start" and c["at_turn_start"] for c in compactions)
    assert any(c["thinking_blocks_after_edit"] > 0 for c in compactions)
    off = run_json(
        "replay", str(transcript), "--max-tokens", str(BUDGET), "--no-escalate-at-turn-start"
    )
    assert not any(c["at_turn_start"] for c in off["compactions"])
    text = " ".join(
        run("replay", "--full", str(transcript), "--max-tokens", str(BUDGET)).stdout.split()
    )
    assert "turn start" in text and "thinking lost" in text


# ------------------------------------------------------------------ the provider's thinking events


async def test_the_providers_thinking_events_are_counted_in_the_meter_stats() -> None:
    session = AmplifierSession({"session": {"orchestrator": "none", "context": "none"}})
    coordinator = session.coordinator
    cleanup = await mount(coordinator, {})
    manager = coordinator.get("context")
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(token_budget=BUDGET)
    stats = manager.token_meter_stats
    assert stats is not None and stats["thinking_blocks_dropped"] == 0
    hooks = coordinator.hooks
    await hooks.emit("provider:thinking_binding_retry", {"model": "claude-opus-5-5"})
    await hooks.emit("provider:thinking_blocks_dropped", {"count": 3})
    await hooks.emit("provider:thinking_blocks_dropped", {"count": 2})
    stats = manager.token_meter_stats
    assert stats is not None
    assert stats["thinking_blocks_dropped"] == 5
    assert stats["thinking_drop_events"] == 2
    assert stats["thinking_binding_retries"] == 1
    await cleanup()
    await hooks.emit("provider:thinking_blocks_dropped", {"count": 7})
    assert manager.token_meter_stats["thinking_blocks_dropped"] == 5, "cleanup unregisters"


async def test_the_notice_never_opens_a_user_turn_inside_the_active_turn() -> None:
    """A history with no prompt: the active turn opens the conversation with thinking. A notice
    placed right after an answer inside it would be read as the user turn the active turn
    starts after, and the answer after it has no thinking (Anthropic refuses it); the notice
    joins the user turn that opens the active turn instead (here: it goes first)."""
    manager = SimpleContextManager()
    thinking = {"type": "thinking", "thinking": "", "signature": "sig"}
    for message in (
        {"role": "assistant", "content": [thinking]},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": ""},
    ):
        await manager.add_message(message)
    logging.disable(logging.WARNING)
    try:
        view = await manager.get_messages_for_request(token_budget=40)
    finally:
        logging.disable(logging.NOTSET)
    assert provider_violations(view) == []
    assert check_view(view, history=manager.messages) == []
    assert (view[0].get("metadata") or {}).get("source") == "context-compaction"


async def test_a_round_a_prompt_merged_into_stays_while_its_turn_is_active() -> None:
    """A prompt right after a call joins that round's user turn; leaving the round out would
    make the prompt a user turn of its own, and the active turn would then open with an
    answer that has no thinking (Anthropic refuses it)."""
    manager = SimpleContextManager()
    thinking = {"type": "thinking", "thinking": "", "signature": "sig"}
    for message in (
        {"role": "assistant", "content": [thinking]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": None, "tool": "bash"}]},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
    ):
        await manager.add_message(message)
    logging.disable(logging.WARNING)
    try:
        view = await manager.get_messages_for_request(token_budget=40)
    finally:
        logging.disable(logging.NOTSET)
    assert [v for v in provider_violations(view) if v.rule == "anthropic-6"] == []
    assert check_view(view, history=manager.messages) == []


def _at(role: str, stamp: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": f"{role} text"}
    if stamp is not None:
        message["metadata"] = {"timestamp": stamp}
    return message


@pytest.mark.parametrize(
    ("history", "idle"),
    [
        ([_at("assistant", "2026-01-01T10:00:00Z"), _at("user", "2026-01-01T10:10:00Z")], 600.0),
        (  # the latest answer before the last message, however far back
            [
                _at("assistant", "2026-01-01T09:00:00Z"),
                _at("user", "2026-01-01T09:30:00Z"),
                _at("assistant", "2026-01-01T10:00:00Z"),
                _at("user", "2026-01-01T10:01:00Z"),
                _at("user", "2026-01-01T10:02:00Z"),
            ],
            120.0,
        ),
        ([_at("user", "2026-01-01T10:00:00Z"), _at("assistant", "2026-01-01T10:05:00Z")], None),
        ([_at("assistant", None), _at("user", "2026-01-01T10:10:00Z")], None),
        ([_at("assistant", "2026-01-01T10:00:00"), _at("user", "2026-01-01T10:10:00")], None),
        ([_at("user", "2026-01-01T10:10:00Z")], None),
        (  # messages written straight into the history may be any mapping
            [
                MappingProxyType(
                    {**_at("assistant", None), "metadata": MappingProxyType({"timestamp": stamp})}
                )
                for stamp in ("2026-01-01T10:00:00Z", "2026-01-01T10:00:30Z")
            ],
            30.0,
        ),
    ],
    ids=[
        "two messages",
        "three back",
        "no earlier answer",
        "no stamp",
        "no zone",
        "one message",
        "mappings",
    ],
)
def test_the_idle_time_is_read_from_the_latest_answer_before_the_last_message(
    history: list[dict[str, Any]], idle: float | None
) -> None:
    index = HistoryIndex(estimate_message_tokens, json_cap=4096)
    index.sync(history, None)
    assert moment_of(index, BUDGET).idle_seconds == idle
