"""Decisions as a function of the history: the request points this manager did not plan.

A history shows where its requests were made: each assistant message answers a request over
the messages before it (a display-only row, ``_public``, answers none). A running session
plans every one of them as it happens (a message admitted with ``add_message`` marks the
points before it as the running session's own); a manager that is handed a stored history
(a resume: ``set_messages``, or a subclass that reads its file back into ``self.messages``)
has planned none. Before its first request it walks those request points in order and plans
each one as the running session did (same planner, same budget, an empty meter), keeping the
escalations and nothing else: no view goes out and no event is emitted. Its first view is
then the one the running session would have sent, byte for byte, and so is every later one.

Most request points are far below any trigger: an upper bound of their view (``_Bound``) shows
it, and they cost a sum over the messages indexed since the last point; the rendered prefix
is extended only where a point is estimated exactly (a turn's start, near a rule). Only a
point where some rule would fire is planned in full, so a resume stays linear in the history.

What a walk cannot know is what the running session learned from provider readings (the
learned overhead, ``token_meter: actual``) or a budget that changed since (another window or
tool set): it plans every point with the budget of the request it precedes.
"""

from __future__ import annotations

__all__ = ["catch_up"]

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..readings._meter import IDENTITY, TokenMeter
from ..sizing._budget import Budget
from ..sizing._room import made_under
from ..views._decisions import CompactionStats, Decisions
from ..vocabulary._public import answers_a_request
from ._plan import Scope
from ._planner import Planner
from ._thresholds import Thresholds
from ._timing import cache_cold, moment_of


class WalkedState(Protocol):
    """What a walk reads and keeps of the session's state (``SessionState``)."""

    walked: int
    """Every request point before this history position has been planned."""
    decisions: Decisions
    stats: CompactionStats | None
    decided_under: int | None
    """The room the decisions in force were made under (``_room``)."""
    epoch: int


def catch_up(
    planner: Planner,
    state: WalkedState,
    messages: Sequence[Mapping[str, Any]],
    budget: Budget,
    factory_text: str | None,
) -> None:
    """Plan the request points of ``messages`` after ``state.walked``, up to the request
    about to be planned (the end of ``messages``), keeping their escalations in ``state``."""
    index = planner.index
    size = len(messages)
    start = state.walked
    state.walked = size
    # A manager that has indexed this history (a request indexes it right after its walk;
    # a reset empties the index) or was handed every message through ``add_message`` follows
    # the running session, which plans its own request points. One that has indexed none is
    # resuming, however the history reached ``self.messages`` (some messages admitted, the
    # rest read straight from a store), and plans them as ``set_messages`` would. In actual
    # mode what decided them were readings, which a walk does not have.
    followed = start == size or len(index.facts) > 0
    if followed or planner.config.token_meter != "estimate":
        return
    # The index is empty: the walk indexes the history from its start, in the tokenizer
    # family the requests will count in.
    index.reconcile(messages, planner.family(budget.model_name))
    meter = TokenMeter()
    bound = _Bound(planner, budget)
    for point in range(1, size):
        if not answers_a_request(messages[point]):
            continue
        index.grow(messages, point)
        scope = planner.scope_here(budget, factory_text, epoch=state.epoch)
        if scope.open_tail is None:
            limits = bound.thresholds(scope, state.stats)
            if bound.quiet(scope, limits):
                continue
            estimate = scope.system_tokens + planner.body_tokens(scope, state.decisions)
            bound.known(estimate)
            timing = planner.timing(scope, limits, used=estimate, estimate=estimate, model=IDENTITY)
            if timing.reason is None:
                continue
        bound.forget()
        plan = planner.plan(
            scope,
            decisions=state.decisions,
            stats=state.stats,
            meter=meter,
            decided_under=state.decided_under,
            views=False,
        )
        if plan.escalated is not None:
            state.decisions, state.stats = plan.decisions, plan.stats
            state.decided_under = made_under(state.decided_under, plan.room, rebased=plan.rebased)


class _Bound:
    """An upper bound of the view's estimate at each request point, so that most points are
    passed over without rendering or timing them.

    Under unchanged decisions, the view at a later point holds what it held at the last
    exactly estimated one, plus at most each message indexed since (a decision made earlier
    only ever shortens what it covers) and a placeholder result for each call among them (an
    answer that arrives later replaces its placeholder; the estimator never counts ids, so
    every placeholder costs the same). A point whose bound stays below the quiet figure
    (``Thresholds.quiet``) and that starts no turn cannot escalate (``escalation_timing``);
    nor can one nearer the trigger whose cache is warm (``cache_cold``), below the figure
    without the cold rule.
    """

    def __init__(self, planner: Planner, budget: Budget) -> None:
        self._planner = planner
        self._effective = budget.effective_budget
        self._placeholder = planner.forms.placeholder("")[1]
        self._estimate: int | None = None
        self._position = 0
        self._thresholds: Thresholds | None = None

    def thresholds(self, scope: Scope, stats: CompactionStats | None) -> Thresholds:
        """The walk's thresholds (the budget in estimate units), kept while what the notices
        may take holds: it seldom changes from one point to the next."""
        planner = self._planner
        known = self._thresholds
        if known is None or known.reserved != planner.notices_reserve(scope, stats):
            known = self._thresholds = planner.thresholds(scope, stats, self._effective)
        return known

    def known(self, estimate: int) -> None:
        """The exact estimate at the point indexed now."""
        self._estimate = estimate
        self._position = len(self._planner.index.facts)

    def forget(self) -> None:
        """The decisions may change here: the next point is estimated exactly."""
        self._estimate = None

    def quiet(self, scope: Scope, limits: Thresholds) -> bool:
        """Whether the point indexed now surely stays below every rule of ``limits``."""
        if self._estimate is None:
            return False
        planner = self._planner
        index = planner.index
        config = planner.config
        moment = moment_of(index, scope.usable)
        if config.escalate_at_turn_start and moment.turn_start:
            return False
        facts = index.facts
        grown = 0
        for position in range(self._position, len(facts)):
            fact = facts[position]
            grown += fact.tokens + self._placeholder * len(fact.calls)
        self._estimate += grown
        self._position = len(facts)
        # Near the trigger, a warm cache still leaves the cold-cache distance to go.
        return self._estimate < limits.quiet or (
            self._estimate < limits.quiet_warm and not cache_cold(config, moment)
        )
