"""Session state and the one delivery boundary every request path goes through.

``SessionState`` is the single mutable record of a session besides its messages: the sticky
decisions and the statistics of the latest escalation, the token meter and its latest
statistics, the ``context:budget`` gate, the history epoch and the diagnostics. It can be
snapshotted and restored, tells whether a plan is still current, and commits one plan in one
synchronous step.

``deliver`` is the boundary where a plan becomes state and events, in this order:
``context:reading_rejected`` (readings the meter did not believe since the last delivery),
``context:pre_compact``, the commit, ``context:compaction`` + ``context:post_compact``,
``context:budget``. The plain, retention and measured paths all call it.
"""

from __future__ import annotations

__all__ = ["DeliveryGuard", "Host", "Pipeline", "SessionState", "StateSnapshot", "deliver"]

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..checks._diagnostics import Diagnostics
from ..planning._catch_up import catch_up
from ..planning._plan import RequestPlan, Scope
from ..planning._planner import Planner
from ..readings._meter import TokenMeter
from ..sizing._budget import Budget
from ..sizing._budget_gate import BudgetEventGate
from ..sizing._room import made_under
from ..views._decisions import NO_DECISIONS, CompactionStats, Decisions
from ..views._turns import after_rewrite
from ..vocabulary import _events as events


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    decisions: Decisions
    stats: CompactionStats | None
    meter: object
    meter_stats: dict[str, Any] | None
    budget_gate: dict[str, Any] | None
    decided_under: int | None = None


class SessionState:
    """Everything a request may change, in one place (the history itself is never changed)."""

    def __init__(self) -> None:
        self.decisions: Decisions = NO_DECISIONS
        self.stats: CompactionStats | None = None
        self.decided_under: int | None = None
        """The room (``RequestPlan.room``) the decisions in force were made under."""
        self.meter = TokenMeter()
        self.meter_stats: dict[str, Any] | None = None
        self.budget_gate = BudgetEventGate()
        self.epoch = 0
        self.walked = 0
        """The history position up to which every request point has been planned: what the
        running session planned itself, or a walk re-derived (``_catch_up``)."""
        self.diagnostics = Diagnostics()

    def admitted(self, position: int) -> None:
        """A message was appended at ``position`` through ``add_message``: to a history this
        session followed from its start, it plans (or chose not to plan) its own request
        points, and none of them is walked again."""
        if self.walked == position:
            self.walked += 1

    def reset(self) -> None:
        """A new history (``set_messages``/``clear``): forget everything derived from the old."""
        self.epoch += 1
        self.walked = 0
        self.decisions = NO_DECISIONS
        self.stats = None
        self.decided_under = None
        self.meter.reset()
        self.meter_stats = None
        self.diagnostics = Diagnostics()

    def snapshot(self) -> StateSnapshot:
        """Everything a failed request must put back (history is never changed by one)."""
        return StateSnapshot(
            decisions=self.decisions,
            stats=self.stats,
            meter=self.meter.snapshot(),
            meter_stats=self.meter_stats,
            budget_gate=self.budget_gate.snapshot(),
            decided_under=self.decided_under,
        )

    def restore(self, snapshot: StateSnapshot) -> None:
        self.decisions = snapshot.decisions
        self.stats = snapshot.stats
        self.meter.restore(snapshot.meter)
        self.meter_stats = snapshot.meter_stats
        self.budget_gate.restore(snapshot.budget_gate)
        self.decided_under = snapshot.decided_under

    def undo(self, before: StateSnapshot) -> None:
        """Put the compaction state back; readings that arrived since ``before`` are applied
        again on top of it (they answer the view that really went out, not the undone one)."""
        meter = self.meter
        self.restore(replace(before, meter=meter.snapshot()))
        meter.restore_keeping_readings(before.meter)

    def is_current(self, plan: RequestPlan) -> bool:
        """Whether ``plan`` was made for the history and decisions in force right now.

        A request that was suspended (a slow hook) while the history was replaced, or while
        a newer request escalated, must not write its older decisions over the new state.
        """
        return plan.epoch == self.epoch and plan.base is self.decisions

    def commit(self, plan: RequestPlan) -> bool:
        """Make the plan's decisions sticky (synchronous: no await can split it).

        Returns False, changing nothing, when the plan is no longer current.
        """
        if not self.is_current(plan):
            return False
        if plan.escalated is not None:
            self.decisions = plan.decisions
            self.stats = plan.stats
            self.decided_under = made_under(self.decided_under, plan.room, rebased=plan.rebased)
        self.meter_stats = plan.meter_stats.as_dict()
        self.meter.note_request_estimate(
            plan.view_tokens,
            accounted=plan.view_tokens + plan.budget.carried_tools,
            room=plan.budget.input_room,
        )
        diagnostics = self.diagnostics
        diagnostics.report_repairs(plan.repaired)
        model = plan.size_model
        diagnostics.warn_if_over_budget(
            self.decisions,
            view_tokens=model.to_real(plan.view_tokens),
            budget=plan.real_budget,
            parts=plan.budget,
        )
        if plan.escalated is not None and plan.stats is not None:
            diagnostics.warn_if_above_target(
                self.decisions,
                view_tokens=model.to_real(plan.stats.after_tokens - plan.stats.notice_tokens),
                system_tokens=plan.system_tokens,
                target=plan.stats.target_tokens,
                overhead=model.overhead,
            )
        if plan.crowded:
            diagnostics.warn_learned_overhead(plan.budget)
        if plan.stuck:
            diagnostics.warn_outside_context(
                measured=plan.meter_stats.used,
                overhead=model.overhead,
                budget=plan.usable_budget,
            )
        return True


class Host(Protocol):
    """What the request paths read live from the manager: its history and its hooks."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    @property
    def hooks(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Pipeline:
    """One session's request pipeline: the history's host, the planner and the state."""

    host: Host
    planner: Planner
    state: SessionState

    async def scope(
        self,
        token_budget: int | None,
        provider: Any,
        *,
        retained: frozenset[int] = frozenset(),
        protected_extra: frozenset[int] = frozenset(),
        requested_output: int | None = None,
    ) -> Scope:
        """Await the request's inputs (budget, system prompt), then fix its scope."""
        budget, factory_text = await self.planner.inputs(
            token_budget, provider, self.state.meter, requested_output
        )
        # Nothing below awaits: from here the request sees one consistent history.
        catch_up(self.planner, self.state, self.host.messages, budget, factory_text)
        return self.planner.scope(
            self.host.messages,
            budget,
            factory_text,
            epoch=self.state.epoch,
            retained=retained,
            protected_extra=protected_extra,
        )

    def plan(self, scope: Scope, *, hard_fit: bool = False, relax: bool = True) -> RequestPlan:
        """Plan on the decisions, statistics and meter in force."""
        state = self.state
        return self.planner.plan(
            scope,
            decisions=state.decisions,
            stats=state.stats,
            meter=state.meter,
            hard_fit=hard_fit,
            relax=relax,
            decided_under=state.decided_under,
        )

    async def deliver(self, plan: RequestPlan) -> bool:
        return await deliver(self.state, self.host.hooks, plan)

    def reset(self) -> None:
        """A new history: forget everything derived from the old one."""
        self.planner.index.reset()
        self.state.reset()
        self.planner.reset()

    def rewritten(self, position: int) -> None:
        """The host's history was reassigned with one that differs from ``position`` on
        (inside a request's synchronous scope step, before its plan reads the decisions)."""
        state = self.state
        state.decisions = after_rewrite(
            self.planner.index, state.decisions, position, self.planner.config.truncate_chars
        )
        if state.stats is not None:
            state.stats = state.stats.rewritten()


class DeliveryGuard(Protocol):
    """How a transaction (the measured path) steers a delivery of an escalation."""

    def proceed(self) -> bool:
        """Asked after ``context:pre_compact``: False stops with nothing changed."""
        ...

    def delivering(self, active: bool) -> None:
        """Told when the ``context:compaction`` delivery starts and when it ends."""
        ...

    def keep(self, stats: CompactionStats) -> bool:
        """Asked after ``context:post_compact`` (``stats``: what the hooks were told of): False
        rolls the compaction back."""
        ...


async def deliver(
    state: SessionState,
    hooks: object,
    plan: RequestPlan,
    *,
    extra: Mapping[str, Any] | None = None,
    guard: DeliveryGuard | None = None,
) -> bool:
    """Turn ``plan`` into state and events; returns whether it took effect.

    0. ``context:reading_rejected`` for each reading the meter rejected since the last one;
    1. ``context:pre_compact`` (a current escalation only): before the commit, so a
       cancellation here changes nothing;
    2. the commit (one synchronous step; nothing when the plan is no longer current);
    3. ``context:compaction`` (with ``extra`` merged in) then ``context:post_compact``;
    4. ``context:budget`` when it changed.

    Without a guard a stale plan still reports the budget. With one (the measured
    transaction) a stale, stopped or rolled-back escalation returns False before step 4.
    """
    for rejection in state.meter.take_rejections():
        await events.safe_emit(hooks, events.READING_REJECTED, rejection.payload())
    stats = plan.stats if plan.escalated is not None else None
    if stats is not None:
        if state.is_current(plan):
            await _announce(hooks, stats)
        elif guard is not None:
            return False
        if guard is not None and not guard.proceed():
            return False
    before = state.snapshot() if guard is not None else None
    committed = state.commit(plan)
    if stats is not None:
        if committed:
            if guard is not None:
                guard.delivering(True)
            try:
                await _emit_compaction(hooks, stats, extra)
            finally:
                if guard is not None:
                    guard.delivering(False)
            if guard is not None and before is not None and not guard.keep(stats):
                state.undo(before)
                return False
        elif guard is not None:
            return False
    if guard is not None and not committed:
        return False  # a stale counted view is not what would go out: nothing to report
    await _emit_budget(state, hooks, plan.budget)
    return committed or stats is None


async def _announce(hooks: object, stats: CompactionStats) -> None:
    await events.safe_emit(
        hooks,
        events.PRE_COMPACT,
        {
            "before_tokens": stats.before_tokens,
            "before_messages": stats.before_messages,
            "budget": stats.budget,
        },
    )


async def _emit_compaction(
    hooks: object, stats: CompactionStats, extra: Mapping[str, Any] | None
) -> None:
    payload = {**stats.payload(), **(extra or {})}
    await events.safe_emit(hooks, events.COMPACTION, payload)
    await events.safe_emit(
        hooks,
        events.POST_COMPACT,
        {
            "after_tokens": payload["after_tokens"],
            "after_messages": payload["after_messages"],
            "strategy_level": payload["strategy_level"],
        },
    )


async def _emit_budget(state: SessionState, hooks: object, budget: Budget) -> None:
    payload = budget.payload()
    gate = state.budget_gate
    if not gate.changed(payload):
        return
    previous = gate.snapshot()
    gate.mark_emitted(payload)  # before the await: one delivery per change
    if not await events.safe_emit(hooks, events.BUDGET, payload):
        gate.restore(previous)
