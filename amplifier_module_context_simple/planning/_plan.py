"""The records of one request: its ``Scope`` (what every candidate view shares) and its
``RequestPlan`` (everything computed before state changes). Only ``_planner`` builds a scope;
``request_plan`` is the one constructor of a plan (the planner's and the measured path's)."""

from __future__ import annotations

__all__ = ["RequestPlan", "Scope", "request_plan"]

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..readings._meter import IDENTITY, SizeModel
from ..readings._meter_stats import MeterStats
from ..sizing._budget import Budget
from ..views._decisions import NO_DECISIONS, CompactionStats, Decisions
from ..views._ladder import Step


@dataclass(slots=True)
class RequestPlan:
    """Everything one request computed before it touches state or emits anything."""

    budget: Budget
    view: list[Mapping[str, Any]]
    view_tokens: int
    decisions: Decisions
    escalated: Step | None
    stats: CompactionStats | None
    meter_stats: MeterStats
    usable_budget: int
    base: Decisions = NO_DECISIONS
    """The decisions in force when the plan was made: it may only replace exactly those."""
    epoch: int = 0
    """The history generation it was made for (``set_messages``/``clear`` start a new one)."""
    system_tokens: int = 0
    repaired: list[str] = field(default_factory=list[str])
    size_model: SizeModel = IDENTITY
    """The real-size model the plan was sized with (the identity in estimate mode)."""
    covered: int = 0
    """Our estimate of the view before any reduction (what an unanchored reading covered)."""
    stuck: bool = False
    """The real figure crossed the trigger and the ladder could change nothing."""
    crowded: bool = False
    """What the readings learned beyond the view and the tools alone leaves the view less
    than the compaction target's share of its room."""
    real_budget: int = 0
    """The budget in ``size_model.to_real`` units: the effective budget, or (when the trigger
    compares a provider reading) the budget plus the tools and overhead it held back."""
    rebased: bool = False
    """The escalation started from no decisions: those in force were made under a room that
    the room now disproves (``_room``)."""

    @property
    def room(self) -> int:
        """The budget in estimate units (``real_budget`` through the size model): what the
        plan's decisions are made under (``_room``)."""
        return self.size_model.to_estimate(self.real_budget)


@dataclass(frozen=True, slots=True)
class Scope:
    """What every candidate view of one request shares."""

    budget: Budget
    systems: list[Mapping[str, Any]]
    system_tokens: int
    usable: int
    """The budget minus the notice reserve: what the trigger and target are shares of."""
    open_tail: int | None
    retained: frozenset[int]
    protected_extra: frozenset[int]
    epoch: int = 0
    notice_cost: int = 0
    """What the longest notice this history could get takes (0 when none would be shown)."""


def request_plan(
    scope: Scope,
    entry: Decisions,
    *,
    view: list[Mapping[str, Any]],
    view_tokens: int,
    step: Step | None,
    stats: CompactionStats | None,
    meter_stats: MeterStats,
    repaired: list[str],
    size_model: SizeModel,
    covered: int,
    stuck: bool = False,
    real_budget: int | None = None,
    crowded: bool = False,
    rebased: bool = False,
) -> RequestPlan:
    """The one constructor of a plan: what it may replace and when comes from the scope."""
    return RequestPlan(
        budget=scope.budget,
        view=view,
        view_tokens=view_tokens,
        decisions=entry if step is None else step.decisions,
        escalated=step,
        stats=stats if step is not None else None,
        meter_stats=meter_stats,
        usable_budget=scope.usable,
        base=entry,
        epoch=scope.epoch,
        system_tokens=scope.system_tokens,
        repaired=repaired,
        size_model=size_model,
        covered=covered,
        stuck=stuck,
        real_budget=scope.budget.effective_budget if real_budget is None else real_budget,
        crowded=crowded,
        rebased=rebased,
    )
