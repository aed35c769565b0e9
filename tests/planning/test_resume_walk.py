"""The resume walk passes most request points over on an upper bound of their view.

A resumed manager re-plans every request point of its stored history (``_catch_up``); to stay
fast it estimates a point exactly only where some rule could fire. These tests pin the two
things that shortcut rests on: no rule fires below the quiet figure (``Thresholds.quiet``)
at a point that starts no turn, and the bound covers everything a view can gain between two
points (placeholder results of interrupted calls included), so a resume still sends the
running session's views.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from amplifier_core import HookRegistry, HookResult
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import ContextConfig, SimpleContextManager
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.planning._thresholds import thresholds
from amplifier_module_context_simple.planning._timing import (
    cache_cold,
    escalation_timing,
    moment_of,
)
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._render import placeholder

from .test_display_rows import write_and_test_session
from .test_when_to_compact import resumed_views_that_differ

START = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def _stamped(message: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {**message, "metadata": {"timestamp": at.isoformat()}}


def _mid_loop_index(idle_seconds: float) -> HistoryIndex:
    """A history whose next request is inside a tool loop, ``idle_seconds`` after the answer."""
    index = HistoryIndex(estimate_message_tokens)
    history = [
        _stamped({"role": "user", "content": "Build it."}, START),
        _stamped(
            {
                "role": "assistant",
                "content": "Building.",
                "tool_calls": [{"id": "c1", "tool": "bash", "arguments": {"cmd": "make"}}],
            },
            START,
        ),
        _stamped(
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            START + timedelta(seconds=idle_seconds),
        ),
    ]
    index.sync(history, None)
    return index


@given(
    threshold=st.floats(0.05, 1.0),
    distance=st.floats(0.0, 1.0),
    ttl=st.sampled_from([0.0, 1.0, 300.0]),
    reserve=st.integers(0, 5_000),
    effective=st.integers(1, 400_000),
    notice_cost=st.integers(0, 5_000),
    idle=st.floats(0.0, 10_000.0),
    below=st.integers(1, 400_000),
)
def test_no_rule_fires_below_the_quiet_figure_outside_a_turn_start(
    threshold: float,
    distance: float,
    ttl: float,
    reserve: int,
    effective: int,
    notice_cost: int,
    idle: float,
    below: int,
) -> None:
    config = ContextConfig(
        compact_threshold=threshold,
        cold_cache_distance=distance,
        cache_ttl_seconds=ttl,
        compaction_notice_token_reserve=reserve,
    )
    index = _mid_loop_index(idle)
    limits = thresholds(config, effective, notice_cost)
    moment = moment_of(index, limits.usable)
    assert not moment.turn_start
    # Where the cache is warm the walk may go up to the figure without the cold rule.
    quiet = limits.quiet if cache_cold(config, moment) else limits.quiet_warm
    used = math.ceil(quiet) - below
    timing = escalation_timing(
        config, moment, limits, used=used, over_limit=used > limits.limit, to_real=lambda g: g
    )
    assert timing.reason is None, (used, quiet, timing.reason)


async def _resume_each_request(
    history: list[dict[str, Any]], budget: int, **settings: Any
) -> list[str]:
    """Drive a running session through ``history`` (a manager with ``settings``); at each
    request point, resume a new one from what the session stored and compare the two views.
    Returns the reasons of the session's escalations, in order."""
    reasons: list[str] = []
    hooks = HookRegistry()

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        reasons.append(data["reason"])
        return HookResult(action="continue")

    hooks.register("context:compaction", record, name="resume-walk")
    running = SimpleContextManager(hooks=hooks, **settings)
    for position, message in enumerate(history):
        if message["role"] == "assistant" and position > 0:
            stored = json.loads(json.dumps(await running.get_messages()))
            sent = await running.get_messages_for_request(budget)
            resumed = SimpleContextManager(hooks=HookRegistry(), **settings)
            await resumed.set_messages(stored)
            again = await resumed.get_messages_for_request(budget)
            assert json.dumps(again) == json.dumps(sent), f"the resume differs at {position}"
        await running.add_message(message)
    return reasons


async def test_a_resume_counts_the_placeholders_of_interrupted_calls() -> None:
    # Calls that never got a result are sent with a placeholder result each. Here every
    # round is interrupted and a hook's reminder follows it (so no request starts a turn or
    # waits on an open call): the view grows mostly by placeholders until a request inside
    # the loop crosses the trigger. A walk that bounded the view by the messages alone
    # would pass that request over.
    reminder = {"role": "user", "content": "ok", "metadata": {"source": "hook"}}
    history: list[dict[str, Any]] = [{"role": "user", "content": "Try everything."}]
    for k in range(40):
        calls = [{"id": f"c{k}_{j}", "tool": "t", "arguments": {}} for j in range(8)]
        history.append({"role": "assistant", "content": "", "tool_calls": calls})
        history.append(dict(reminder))
    history.append({"role": "assistant", "content": "Done."})
    reasons = await _resume_each_request(history, 6_000)
    assert "threshold" in reasons


async def test_a_resume_with_the_turn_start_rule_off_escalates_as_the_session_did() -> None:
    # Without the rule a prompt's request is passed over on its bound like any other, the
    # walk's very first point included.
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for k in range(30):
        call = {"id": f"c{k}", "tool": "read", "arguments": {"n": k}}
        history.append({"role": "assistant", "content": f"Part {k}.", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": "entry\n" * 60})
        if k % 10 == 9:
            history.append({"role": "assistant", "content": "Next?"})
            history.append({"role": "user", "content": f"Go on from {k}."})
    history.append({"role": "assistant", "content": "Done."})
    reasons = await _resume_each_request(history, 6_000, escalate_at_turn_start=False)
    assert "threshold" in reasons


async def test_a_resume_escalates_where_a_view_reaches_the_trigger_exactly() -> None:
    # A chat without tools: the bound of each point is its exact estimate. The budget puts the
    # trigger on the very size of one request's view, where the rule fires (at or above it),
    # so that point is no quiet one even though nothing in it exceeds the trigger.
    settings: dict[str, Any] = {
        "escalate_at_turn_start": False, "cache_ttl_seconds": 0,
        "compact_threshold": 0.5, "target_usage": 0.3,
    }  # fmt: skip
    history: list[dict[str, Any]] = []
    for k in range(12):
        history.append({"role": "user", "content": f"Question {k}: " + "why blue? " * 20})
        history.append({"role": "assistant", "content": f"Answer {k}: " + "scattering. " * 20})
    sizing = SimpleContextManager(**settings)
    sizes: list[int] = []
    for message in history:
        if message["role"] == "assistant":
            await sizing.get_messages_for_request(1_000_000)
            sizes.append(sizing.token_meter_stats["estimated"])
        await sizing.add_message(message)
    size = sizes[5]
    config = ContextConfig(**settings)
    budget = next(b for b in range(2 * size, 2 * size + 2_000) if config.trigger(b) == size)
    reasons = await _resume_each_request(history, budget, **settings)
    assert reasons[:1] == ["threshold"]


async def test_a_resume_at_a_cold_cache_near_the_trigger_escalates_as_the_session_did() -> None:
    # Each tool takes an hour: every request finds the cache cold, so the session escalates
    # as soon as its view is within the cold-cache distance of the trigger, below the trigger.
    history: list[dict[str, Any]] = [_stamped({"role": "user", "content": "Go."}, START)]
    at = START
    for k in range(80):
        call = {"id": f"c{k}", "tool": "bash", "arguments": {"n": k}}
        history.append(
            _stamped({"role": "assistant", "content": f"Step {k}.", "tool_calls": [call]}, at)
        )
        at += timedelta(hours=1)
        result = {"role": "tool", "tool_call_id": f"c{k}", "content": "line\n" * 40}
        history.append(_stamped(result, at))
    history.append(_stamped({"role": "assistant", "content": "Done."}, at))
    reasons = await _resume_each_request(history, 6_000)
    assert "cold_cache" in reasons


@given(ttl=st.integers(1, 10_000))  # whole seconds: timestamps keep microseconds
def test_the_cache_is_cold_from_its_lifetime_on(ttl: int) -> None:
    config = ContextConfig(cache_ttl_seconds=ttl)
    usable = config.usable_budget(100_000)
    assert cache_cold(config, moment_of(_mid_loop_index(ttl), usable))
    assert not cache_cold(config, moment_of(_mid_loop_index(ttl - 0.001), usable))
    off = ContextConfig(cache_ttl_seconds=0)
    assert not cache_cold(off, moment_of(_mid_loop_index(ttl), usable))


@given(call_id=st.text(max_size=80), family=st.sampled_from([None, "o200k", "claude3", "claude47"]))
def test_every_placeholder_result_costs_the_same(call_id: str, family: str | None) -> None:
    # The walk's bound prices each call's placeholder once, with any id: it holds only
    # while the estimator counts no ids.
    assert estimate_message_tokens(placeholder(call_id), family=family) == (
        estimate_message_tokens(placeholder(""), family=family)
    )


async def _compacted_history() -> list[dict[str, Any]]:
    running = SimpleContextManager()
    history = [{"role": "user", "content": "Refactor the parser."}]
    for k in range(30):
        call = {"id": f"c{k}", "tool": "read_file", "arguments": {"path": f"src/p{k}.py"}}
        history.append({"role": "assistant", "content": f"Reading {k}.", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{k}", "content": "x = 1\n" * 120})
    for message in history:
        if message["role"] == "assistant":
            await running.get_messages_for_request(6_000)
        await running.add_message(message)
    assert running.decisions.escalations >= 2
    return json.loads(json.dumps(await running.get_messages()))


async def _resumed_view(stored: list[dict[str, Any]]) -> tuple[str, int]:
    resumed = SimpleContextManager()
    await resumed.set_messages(json.loads(json.dumps(stored)))
    view = await resumed.get_messages_for_request(6_000)
    return json.dumps(view), resumed.decisions.escalations


async def test_a_manager_that_has_run_is_resumed_afresh_by_set_messages() -> None:
    stored = await _compacted_history()
    used = SimpleContextManager()
    # Another session of as many messages first, every request its own (small: no escalation).
    for message in stored:
        short = {k: v for k, v in message.items() if k != "metadata"}
        if message["role"] == "tool":
            short["content"] = "ok"
        if message["role"] == "assistant":
            await used.get_messages_for_request(6_000)
        await used.add_message(short)
    assert used.decisions.escalations == 0
    await used.set_messages(json.loads(json.dumps(stored)))
    view = await used.get_messages_for_request(6_000)
    assert (json.dumps(view), used.decisions.escalations) == await _resumed_view(stored)


async def test_a_history_partly_admitted_and_partly_read_from_a_store_is_resumed() -> None:
    # Decided here: a manager that has planned no request yet is resuming, whichever way the
    # stored messages reached ``self.messages``. One message came through ``add_message``,
    # the rest were read back from a store (as context-persistent does): the request points
    # of the stored part were the stored session's, and are planned as a resume plans them.
    stored = await _compacted_history()
    manager = SimpleContextManager()
    await manager.add_message(dict(stored[0]))
    manager.messages = [manager.messages[0], *json.loads(json.dumps(stored[1:]))]
    view = await manager.get_messages_for_request(6_000)
    assert (json.dumps(view), manager.decisions.escalations) == await _resumed_view(stored)


@pytest.mark.parametrize("admitted", [1, 2])
async def test_a_manager_that_has_planned_a_request_follows_what_is_written_after_it(
    admitted: int,
) -> None:
    # The other side of the decision above: once a manager has planned a request on its
    # history, it is the running session, however few messages it was handed and however
    # the rest arrive. Only the request now is planned, as the running session plans it.
    stored = await _compacted_history()
    manager = SimpleContextManager()
    for message in stored[:admitted]:
        await manager.add_message(dict(message))
    await manager.get_messages_for_request(6_000)
    manager.messages = [*manager.messages, *json.loads(json.dumps(stored[admitted:]))]
    await manager.get_messages_for_request(6_000)
    assert manager.decisions.escalations == 1
    assert (await _resumed_view(stored))[1] >= 2


async def test_a_history_admitted_whole_through_add_message_is_the_running_session_s() -> None:
    # Every message came through ``add_message``: the running session chose to make no
    # request before now, so only this request is planned (a resume would plan several).
    stored = await _compacted_history()
    manager = SimpleContextManager()
    for message in json.loads(json.dumps(stored)):
        await manager.add_message(message)
    await manager.get_messages_for_request(6_000)
    assert manager.decisions.escalations == 1
    assert (await _resumed_view(stored))[1] >= 2


async def test_a_resume_counts_in_the_tokenizer_family_its_requests_count_in() -> None:
    # The walk estimates every request point in the family the resumed requests will use:
    # in another, its escalations come at other points than the running session's did.
    history = [{"role": "user", "content": "Refactor the parser."}, *_stamped_rounds(0, 30)]
    running = SimpleContextManager(token_family="o200k")
    for message in history:
        if message["role"] == "assistant":
            await running.get_messages_for_request(6_000)
        await running.add_message(message)
    sent = await running.get_messages_for_request(6_000)
    assert running.decisions.escalations >= 2
    resumed = SimpleContextManager(token_family="o200k")
    await resumed.set_messages(json.loads(json.dumps(await running.get_messages())))
    assert json.dumps(await resumed.get_messages_for_request(6_000)) == json.dumps(sent)
    assert resumed.decisions == running.decisions


class _NamesItsModel:
    """A provider that names its model and nothing else: the family comes from the name."""

    def __init__(self, model: str) -> None:
        self.model = model

    async def get_model_info(self) -> dict[str, str]:
        return {"id": self.model}


async def test_a_resume_counts_in_the_family_of_the_model_its_provider_names() -> None:
    provider = _NamesItsModel("gpt-4o")  # o200k: the default family counts otherwise
    history = [{"role": "user", "content": "Refactor the parser."}, *_stamped_rounds(0, 30)]
    running = SimpleContextManager()
    for message in history:
        if message["role"] == "assistant":
            await running.get_messages_for_request(6_000, provider=provider)
        await running.add_message(message)
    sent = await running.get_messages_for_request(6_000, provider=provider)
    assert running.decisions.escalations >= 2
    resumed = SimpleContextManager()
    await resumed.set_messages(json.loads(json.dumps(await running.get_messages())))
    again = await resumed.get_messages_for_request(6_000, provider=provider)
    assert json.dumps(again) == json.dumps(sent)
    assert resumed.decisions == running.decisions


def _stamped_rounds(first: int, last: int) -> list[dict[str, Any]]:
    """Tool rounds ``first`` to ``last``, stamped (two managers admit them alike)."""
    rounds: list[dict[str, Any]] = []
    for k in range(first, last):
        at = (START + timedelta(seconds=10 * k)).isoformat()
        call = {"id": f"c{k}", "tool": "read_file", "arguments": {"path": f"src/p{k}.py"}}
        rounds.append(
            {"role": "assistant", "content": f"Reading {k}.", "tool_calls": [call],
             "metadata": {"timestamp": at}}
        )  # fmt: skip
        rounds.append(
            {"role": "tool", "tool_call_id": f"c{k}", "content": "x = 1\n" * 120,
             "metadata": {"timestamp": at}}
        )  # fmt: skip
    return rounds


@pytest.mark.parametrize("later_budget", [6_000, 12_000])
async def test_a_resumed_manager_goes_on_as_the_running_one_at_any_budget(
    later_budget: int,
) -> None:
    # The resume keeps what the running session kept of its escalations, the room they were
    # made under included: a larger budget later proves that room too small in both, so both
    # escalate afresh at the same request.
    history = [{"role": "user", "content": "Refactor the parser."}, *_stamped_rounds(0, 30)]
    running = SimpleContextManager()
    for message in history:
        if message["role"] == "assistant":
            await running.get_messages_for_request(6_000)
        await running.add_message(message)
    resumed = SimpleContextManager()
    await resumed.set_messages(json.loads(json.dumps(await running.get_messages())))
    # The resume plans under the budget of its first request: the running session's here.
    sent = await running.get_messages_for_request(6_000)
    assert json.dumps(await resumed.get_messages_for_request(6_000)) == json.dumps(sent)
    for message in _stamped_rounds(30, 70):
        if message["role"] == "assistant":
            sent = await running.get_messages_for_request(later_budget)
            again = await resumed.get_messages_for_request(later_budget)
            assert json.dumps(again) == json.dumps(sent)
        await running.add_message(dict(message))
        await resumed.add_message(dict(message))
    assert resumed.decisions == running.decisions


@pytest.mark.parametrize("budget", [6_000, 8_000, 12_000])
async def test_a_resume_weighs_the_system_prompt_the_factory_makes(budget: int) -> None:
    # The factory's prompt takes a large part of the budget: a walk that left it out would
    # plan its points as if the room were larger, and escalate later than the session did.
    history = write_and_test_session()
    requests, differ = await resumed_views_that_differ(history, budget, factory="rules " * 900)
    assert requests > 5
    assert differ == 0


async def test_a_resume_plans_the_very_first_request_point() -> None:
    # The first prompt alone is past the budget: the running session's first request already
    # escalates (the budget wins over the prompt's protection), and a resume must too.
    history = [
        {"role": "user", "content": "Review this log:\n" + "error at line 12 in parser\n" * 900},
        {"role": "assistant", "content": "Reading it."},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": "Done."},
    ]
    await _resume_each_request(history, 3_000)
    running = SimpleContextManager()
    for message in history:
        if message["role"] == "assistant":
            await running.get_messages_for_request(3_000)
        await running.add_message(message)
    await running.get_messages_for_request(3_000)
    resumed = SimpleContextManager()
    await resumed.set_messages(json.loads(json.dumps(await running.get_messages())))
    await resumed.get_messages_for_request(3_000)
    assert resumed.decisions == running.decisions
    assert running.decisions.escalations >= 1
