"""The planner and the session state, driven directly: no manager involved."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import pytest

from amplifier_module_context_simple import ContextConfig, SimpleContextManager
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.planning._plan import RequestPlan
from amplifier_module_context_simple.planning._planner import Planner
from amplifier_module_context_simple.planning._timing import Timing, escalation_timing, moment_of
from amplifier_module_context_simple.readings._size_model import IDENTITY, SizeModel
from amplifier_module_context_simple.session._session import SessionState, deliver
from amplifier_module_context_simple.sizing._budget import derive_budget
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._decisions import NO_DECISIONS


def _history(turns: int, size: int = 2_000) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Start the task."}]
    for t in range(turns):
        messages.append({"role": "assistant", "content": f"step {t} " + "x" * size})
        messages.append({"role": "user", "content": f"go on {t}"})
    return messages


def _planner(**config: Any) -> Planner:
    settings = ContextConfig.from_mapping(config)
    return Planner(settings, HistoryIndex(estimate_message_tokens))


async def _plan(planner: Planner, messages: list[dict[str, Any]], **kw: Any) -> RequestPlan:
    state = SessionState()
    budget, text = await planner.inputs(kw.pop("token_budget", None), None)
    scope = planner.scope(messages, budget, text, epoch=state.epoch)
    return planner.plan(
        scope, decisions=state.decisions, stats=state.stats, meter=state.meter, **kw
    )


async def test_below_the_trigger_the_plan_is_the_history_as_is() -> None:
    planner = _planner()
    messages = _history(3)
    plan = await _plan(planner, messages)
    assert plan.escalated is None and plan.stats is None
    assert plan.decisions is NO_DECISIONS and plan.base is NO_DECISIONS
    assert [m["content"] for m in plan.view] == [m["content"] for m in messages]
    assert plan.view_tokens == sum(estimate_message_tokens(m) for m in messages)


async def test_past_the_trigger_the_plan_escalates_with_statistics_and_a_notice() -> None:
    planner = _planner(max_tokens=6_000)
    plan = await _plan(planner, _history(40))
    assert plan.escalated is not None and plan.stats is not None
    assert plan.decisions is plan.escalated.decisions and plan.base is NO_DECISIONS
    assert plan.stats.after_tokens < plan.stats.before_tokens
    assert plan.usable_budget == planner.config.usable_budget(plan.budget.effective_budget)
    assert plan.view[-1]["role"] == "user"  # the compaction notice is composed last
    assert plan.view_tokens <= plan.budget.effective_budget


async def test_the_notice_reserve_comes_off_the_budget_before_the_trigger() -> None:
    with_reserve = await _plan(_planner(max_tokens=20_000), _history(1))
    without = await _plan(_planner(max_tokens=20_000, compaction_notice_enabled=False), _history(1))
    assert with_reserve.usable_budget == without.usable_budget - 800


async def test_the_prefix_cache_renders_only_what_is_new() -> None:
    planner = _planner()
    messages = _history(50)
    await _plan(planner, messages)
    first = planner.rendered_messages
    assert first == len(messages)
    messages.append({"role": "assistant", "content": "one more"})
    await _plan(planner, messages)
    assert planner.rendered_messages - first <= 2


async def test_deliver_commits_then_emits_in_order() -> None:
    seen: list[str] = []

    class Hooks:
        async def emit(self, event: str, payload: dict[str, Any]) -> None:
            seen.append(event)

    planner, state = _planner(max_tokens=6_000), SessionState()
    budget, text = await planner.inputs(None, None)
    scope = planner.scope(_history(40), budget, text, epoch=state.epoch)
    plan = planner.plan(scope, decisions=state.decisions, stats=state.stats, meter=state.meter)
    assert state.is_current(plan)
    assert await deliver(state, Hooks(), plan)
    assert state.decisions is plan.decisions
    assert not state.is_current(plan)  # a plan may only replace the decisions it saw
    assert seen == [
        "context:pre_compact",
        "context:compaction",
        "context:post_compact",
        "context:budget",
    ]


def test_the_constructor_keywords_are_the_config_fields() -> None:
    # Every key reads back as an attribute of the same name, from the one config record,
    # with the config's own default where none is given.
    keywords = {f.name: f.default for f in fields(ContextConfig)}
    assert SimpleContextManager(**keywords).config == ContextConfig()
    manager = SimpleContextManager(max_tokens=12_345, token_family="claude3")
    for name in keywords:
        assert getattr(manager, name) == getattr(manager.config, name), name
    with pytest.raises(TypeError, match="compact_threshold"):
        SimpleContextManager(compact_treshold=0.5)  # named, with the key it was meant to be
    assert (manager.max_tokens, manager.token_family) == (12_345, "claude3")
    with pytest.raises(AttributeError, match="no attribute 'compact_treshold'"):
        _ = manager.compact_treshold  # a typo is an error, not a silent None


async def test_a_reused_scope_follows_everything_it_is_built_from() -> None:
    # ``scope_here`` hands back its last scope while nothing it is built from changed (a
    # resume's walk asks at every request point); each input below must still be seen.
    planner = _planner()
    messages = _history(2)
    small, _ = await planner.inputs(6_000, None)
    large, _ = await planner.inputs(60_000, None)
    # Each step changes one input against the step before it.
    first = planner.scope(messages, small, None)
    assert planner.scope(messages, small, None) is first  # nothing changed: reused
    assert planner.scope(messages, large, None).budget is large
    assert planner.scope(messages, large, "Be terse.").systems[0]["content"] == "Be terse."
    assert planner.scope(messages, large, "Be terse.", epoch=1).epoch == 1
    retained = frozenset({1})
    assert planner.scope(messages, large, "Be terse.", epoch=1, retained=retained).retained == (
        retained
    )
    extra = frozenset({2})
    assert (
        planner.scope(
            messages, large, "Be terse.", epoch=1, retained=retained, protected_extra=extra
        ).protected_extra
        == extra
    )
    planner.scope(messages, small, None)
    messages.append({"role": "system", "content": "A hook's note."})
    assert [m["content"] for m in planner.scope(messages, small, None).systems] == [
        "A hook's note."
    ]
    messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "tool": "t"}]})
    assert planner.scope(messages, small, None).open_tail == len(messages) - 1


async def test_a_reused_scope_follows_the_notice_cost_as_the_history_grows() -> None:
    # The longest notice states the history's message count: its cost steps up where the
    # count gains a digit (the notice's figures reach the size plus a thousand) for an
    # estimator that counts characters (the built-in one prices a number as one run).
    def by_characters(message: Any, family: str | None = None) -> int:
        return len(json.dumps(message))

    planner = Planner(ContextConfig(), HistoryIndex(by_characters))
    budget, _ = await planner.inputs(None, None)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}] * 8_990
    before = planner.scope(messages, budget, None).notice_cost
    messages = messages + [{"role": "user", "content": "go"}] * 20
    after = planner.scope(messages, budget, None)
    assert after.notice_cost == planner.composer.notice_cost() > before


async def test_a_system_prompt_rewritten_in_place_is_sent_at_once() -> None:
    # A subclass may edit ``self.messages`` in place (or re-read it from its file): the
    # next view sends what the history holds now, with its size, not a scope kept from before.
    manager = SimpleContextManager()
    await manager.add_message({"role": "system", "content": "You are OLD."})
    await manager.add_message({"role": "user", "content": "go"})
    first = await manager.get_messages_for_request()
    manager.messages[0] = {"role": "system", "content": "You are NEW. " * 400}
    again = await manager.get_messages_for_request()
    assert first[0]["content"] == "You are OLD."
    assert again[0]["content"] == "You are NEW. " * 400
    assert manager.token_meter_stats["estimated"] > 400


async def test_without_a_meter_nothing_is_held_back_for_a_learned_overhead() -> None:
    planner = _planner(max_tokens=6_000)
    config = planner.config
    budget, _ = await planner.inputs(None, None)
    bare = await derive_budget(
        token_budget=None,
        provider=None,
        max_tokens=config.max_tokens,
        max_tokens_fallback=config.max_tokens_fallback,
        output_reserve_fraction=config.output_reserve_fraction,
    )
    assert budget == bare


async def test_the_meter_figure_is_of_the_view_as_it_goes_out_notice_included() -> None:
    # After a compaction the view carries a notice: readings answer whole views, so the
    # figure the trigger uses is that of the view sent, not of the history part alone.
    manager = SimpleContextManager(token_meter="actual", max_tokens=6_000)
    messages = _history(40)
    view: list[dict[str, Any]] = []
    for message in messages:
        await manager.add_message(message)
        if message["role"] == "user":
            view = await manager.get_messages_for_request()
            sent = sum(estimate_message_tokens(m) for m in view)
            assert manager.claim_foreground_usage()(input_tokens=sent + 50)
    view = await manager.get_messages_for_request()
    stats = manager.token_meter_stats
    assert stats is not None and stats["source"] == "actual"
    assert stats["view_estimate"] == sum(estimate_message_tokens(m) for m in view)
    assert stats["view_estimate"] > stats["estimated"]  # the notice is part of the view
    assert stats["images_measured"] is False  # a reading exists, but the view has no image


def _working_turns(turns: int) -> list[dict[str, Any]]:
    # Turns that grow inside their loop (a tool round each), then a fresh prompt.
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        call = {"id": f"c{t}", "tool": "read", "arguments": {}}
        messages += [
            {"role": "user", "content": f"task {t}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "line\n" * 150},
            {"role": "assistant", "content": f"done {t}"},
        ]
    return [*messages, {"role": "user", "content": "next task"}]


def _decision(timing: Timing) -> tuple[str | None, int, bool]:
    return timing.reason, timing.real_target, timing.for_turn


async def test_timing_converts_the_turns_growth_to_real_units_without_the_overhead() -> None:
    planner = _planner(max_tokens=6_000)
    budget, text = await planner.inputs(None, None)
    scope = planner.scope(_working_turns(6), budget, text)
    limits = planner.thresholds(scope, None, budget.effective_budget)
    moment = moment_of(planner.index, scope.usable)
    assert moment.turn_start and moment.turn_growth > 0
    reasons: set[str | None] = set()
    for used in range(0, int(limits.trigger), 37):
        # On estimates the growth is the growth itself.
        on_estimates = escalation_timing(
            planner.config, moment, limits, used=used, over_limit=False, to_real=lambda g: g
        )
        timing = planner.timing(scope, limits, used=used, estimate=0, model=IDENTITY)
        assert _decision(timing) == _decision(on_estimates)
        reasons.add(timing.reason)
        # A growth is a difference of sizes: the fixed overhead cancels out.
        with_overhead = planner.timing(
            scope, limits, used=used, estimate=0, model=SizeModel(overhead=700, k=1.5)
        )
        without = planner.timing(scope, limits, used=used, estimate=0, model=SizeModel(k=1.5))
        assert _decision(with_overhead) == _decision(without)
        reasons.add(with_overhead.reason)
    assert reasons == {None, "turn_start"}


async def test_a_view_estimated_past_the_limit_escalates_even_below_the_trigger() -> None:
    planner = _planner(max_tokens=6_000)
    budget, text = await planner.inputs(None, None)
    scope = planner.scope(_history(2), budget, text)
    limits = planner.thresholds(scope, None, budget.effective_budget)
    at_limit = planner.timing(scope, limits, used=0, estimate=limits.limit, model=IDENTITY)
    past = planner.timing(scope, limits, used=0, estimate=limits.limit + 1, model=IDENTITY)
    assert at_limit.reason is None
    assert past.reason == "over_budget"


async def test_the_ladder_keeps_the_running_call_and_the_results_it_already_has() -> None:
    # Two parallel calls, one answered: the orchestrator is still running the other, and the
    # round it will send must reach the provider whole.
    planner = _planner(max_tokens=6_000, protected_recent=0.0, protected_tool_results=0)
    calls = [{"id": "one", "tool": "read"}, {"id": "two", "tool": "ls"}]
    messages = _working_turns(6)
    messages += [
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "one", "content": "line\n" * 400},
    ]
    budget, text = await planner.inputs(None, None)
    scope = planner.scope(messages, budget, text)
    assert scope.open_tail == len(messages) - 2
    usage = scope.system_tokens + planner.body_tokens(scope, NO_DECISIONS)
    steps = list(planner.ladder(scope, NO_DECISIONS, usage=usage, target=0))
    assert steps
    last = steps[-1].decisions
    kept = {len(messages) - 2, len(messages) - 1}
    assert not kept & (set(last.removed) | set(last.truncated) | set(last.stubbed))


@pytest.mark.parametrize("placement", ["tail", "in_place"])
async def test_a_notice_at_the_tail_has_no_room_kept_while_a_call_is_running(
    placement: str,
) -> None:
    # At the tail the notice comes after the last message; while a call is running nothing
    # may follow it but its results, so no notice is composed and no room is kept for one.
    # In place, the notice goes inside the view and keeps its room.
    planner = _planner(max_tokens=6_000, compaction_notice_placement=placement)
    budget, text = await planner.inputs(None, None)
    closed = planner.scope(_working_turns(3), budget, text)
    assert closed.open_tail is None and closed.notice_cost == planner.composer.notice_cost() > 0
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "open", "tool": "ls"}]}
    running = [*_working_turns(3), call]
    kept = planner.scope(running, budget, text).notice_cost
    assert kept == (closed.notice_cost if placement == "in_place" else 0)


async def test_an_escalation_says_whether_it_started_afresh() -> None:
    # Decisions made under a small room, then a room many times larger: they are disproved,
    # and the escalation the grown history needs starts from nothing (rebased). Building on
    # decisions made under the same room is no rebase.
    planner, state = _planner(), SessionState()

    async def plan_at(
        messages: list[dict[str, Any]], token_budget: int, decisions: Any, under: int | None
    ) -> RequestPlan:
        budget, text = await planner.inputs(token_budget, None)
        scope = planner.scope(messages, budget, text, epoch=state.epoch)
        return planner.plan(
            scope, decisions=decisions, stats=None, meter=state.meter, decided_under=under
        )

    small = await plan_at(_history(30), 6_000, NO_DECISIONS, None)
    assert small.escalated is not None and not small.rebased
    grown = _history(200)
    same_room = await plan_at(grown, 6_000, small.decisions, small.room)
    assert same_room.escalated is not None and not same_room.rebased
    larger = await plan_at(grown, 60_000, small.decisions, small.room)
    assert larger.escalated is not None and larger.rebased


class _Events:
    """A hook registry stand-in that records the names of the events emitted."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        del payload
        self.seen.append(event)


async def test_a_restored_snapshot_puts_back_everything_a_request_changed() -> None:
    planner, state = _planner(max_tokens=6_000), SessionState()

    async def request(messages: list[dict[str, Any]]) -> None:
        budget, text = await planner.inputs(None, None)
        scope = planner.scope(messages, budget, text, epoch=state.epoch)
        plan = planner.plan(
            scope,
            decisions=state.decisions,
            stats=state.stats,
            meter=state.meter,
            decided_under=state.decided_under,
        )
        assert await deliver(state, _Events(), plan)

    await request(_history(40))
    kept = (state.decisions, state.stats, state.meter_stats, state.decided_under)
    gate = state.budget_gate.snapshot()
    assert None not in kept
    snapshot = state.snapshot()
    await request(_history(120))
    assert state.decisions is not kept[0] and state.stats is not kept[1]
    state.restore(snapshot)
    assert (state.decisions, state.stats, state.meter_stats, state.decided_under) == kept
    assert state.stats is kept[1]
    assert state.budget_gate.snapshot() == gate


async def test_each_new_history_gets_an_epoch_of_its_own() -> None:
    state, seen = SessionState(), set[int]()
    for _ in range(3):
        seen.add(state.epoch)
        state.reset()
    assert state.epoch not in seen and len(seen) == 3


async def test_a_stale_escalation_delivered_without_a_guard_still_reports_its_budget() -> None:
    hooks = _Events()
    planner, state = _planner(), SessionState()
    messages = _history(40)
    plans: list[RequestPlan] = []
    for token_budget in (6_000, 7_000):
        budget, text = await planner.inputs(token_budget, None)
        scope = planner.scope(messages, budget, text, epoch=state.epoch)
        plans.append(
            planner.plan(scope, decisions=state.decisions, stats=state.stats, meter=state.meter)
        )
    first, stale = plans
    assert await deliver(state, hooks, first)
    hooks.seen.clear()
    assert stale.escalated is not None and not state.is_current(stale)
    assert not await deliver(state, hooks, stale)
    assert hooks.seen == ["context:budget"]
