"""The negotiated measured-request view (the ``context.measured_request_view`` capability).

The orchestrator owns the complete request (tools, overlays) and can have the provider count
it; we own the history. So we hand it candidate views, it counts each one, and we walk the
compaction ladder on the provider's own numbers: at most the original candidate plus one count
per rung that changes something. Nothing becomes sticky until the orchestrator commits the
returned transaction right before dispatch.
"""

from __future__ import annotations

__all__ = [
    "OUTCOMES",
    "CountView",
    "Counted",
    "FitOutput",
    "MeasuredTransaction",
    "get_measured_request_view",
    "read_counted",
    "read_envelope",
]

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..planning._plan import RequestPlan, Scope, request_plan
from ..planning._planner import Planner
from ..readings._meter import fit_size_model
from ..readings._meter_stats import MeterStats
from ..sizing._budget import context_length_error
from ..sizing._envelope import (
    NOT_COUNTED,
    Counted,
    FitOutput,
    Measurement,
    fail_closed,
    fit,
    read_counted,
    read_envelope,
    unusable_reason,
)
from ..sizing._room import disproved
from ..views._decisions import NO_DECISIONS, CompactionStats, Decisions
from ..views._ladder import Step
from ._measured_transaction import MeasuredTransaction
from ._retention import resolve_retained
from ._session import Pipeline, SessionState

logger = logging.getLogger(__name__)

CountView = Callable[[list[dict[str, Any]]], Awaitable[Mapping[str, Any]]]

OUTCOMES = (
    "not_needed",
    "target_reached",
    "protected_floor",
    "reduced_output",
    "measurement_unavailable",
)


async def get_measured_request_view(
    pipeline: Pipeline,
    *,
    provider: Any,
    retain_contents: Iterable[str],
    count_view: CountView,
    fit_output: FitOutput | None = None,
) -> dict[str, Any]:
    planner = pipeline.planner
    if planner.config.token_meter != "actual":
        raise RuntimeError(
            "get_measured_request_view needs token_meter='actual' in the context-simple config"
        )
    messages = pipeline.host.messages
    retained = resolve_retained(messages, retain_contents)
    developers = frozenset(i for i, m in enumerate(messages) if m.get("role") == "developer")
    scope = await pipeline.scope(None, provider, retained=retained, protected_extra=developers)
    return await _walk(pipeline, scope, count_view, fit_output)


async def _walk(
    pipeline: Pipeline,
    scope: Scope,
    count_view: CountView,
    fit_output: FitOutput | None,
) -> dict[str, Any]:
    """The measured passes: the planner's render, usage, ladder and statistics, counted."""
    planner, state = pipeline.planner, pipeline.state
    entry = state.decisions
    # The orchestrator counts the whole request: tools and overhead included, so the trigger
    # and the target are shares of the budget plus what it held back for them.
    limits = planner.thresholds(scope, state.stats, scope.budget.request_budget)
    policy_budget, effective = scope.usable, limits.effective
    trigger, target = limits.trigger, limits.target
    base_view, base_tokens, body = planner.compose(scope, entry, state.stats)
    meter_stats = planner.usage(scope, scope.system_tokens + body.tokens, base_tokens, state.meter)
    staged = _Staged(scope, entry, meter_stats, base_tokens)
    hooks = pipeline.host.hooks
    attempt = await count_view(base_view)  # type: ignore[arg-type]
    calls = 1
    counted = read_counted(attempt)
    first = None if counted is None else counted.measurement
    result: dict[str, Any] = {
        "policy_budget": policy_budget,
        "trigger": int(trigger),  # reported whole, compared exactly (as the plain path does)
        "target": target,
        "measured_before": None if first is None else first.input_tokens,
        # Why the count could not be used (None: it could): in the result and in the log.
        "unusable_reason": None if first is not None else unusable_reason(attempt),
    }
    if first is None:
        return await _fallback(pipeline, scope, base_view, attempt, calls, count_view, result)
    # Real size of a view = overhead + k * estimate, fitted on this walk's own counts.
    pairs = [(base_tokens, first.input_tokens)]
    plan = staged.plan(None, None, base_tokens, body.repaired, pairs)
    if first.input_tokens < trigger and not first.over_limit:
        return _finish(state, hooks, result, base_view, attempt, first, calls, "not_needed", plan)

    start, usage = entry, base_tokens
    if not entry.empty and disproved(
        state.decided_under, fit_size_model(pairs).to_estimate(effective)
    ):
        # The decisions in force were made under a room the count now disproves.
        start = NO_DECISIONS
        usage = scope.system_tokens + planner.render(scope, start).tokens
        staged = _Staged(scope, entry, meter_stats, base_tokens, rebased=True)
    steps = planner.ladder(
        scope, start, usage=usage, target=fit_size_model(pairs).to_estimate(target)
    )
    measured, view = first, base_view
    unavailable = False
    try:
        step = next(steps)
        while True:
            candidate, tokens, step_stats, repaired = _step_view(
                planner, scope, step, start, (base_tokens, len(base_view)), target
            )
            next_attempt = await count_view(candidate)  # type: ignore[arg-type]
            calls += 1
            reading = read_envelope(next_attempt)
            if reading is None:
                # Fall back to the last view that was counted, with its own envelope.
                unavailable = True
                result["unusable_reason"] = unusable_reason(next_attempt)
                break
            measured, view, attempt = reading, candidate, next_attempt
            pairs.append((tokens, measured.input_tokens))
            plan = staged.plan(step, step_stats, tokens, repaired, pairs)
            if measured.input_tokens <= target and not measured.over_limit:
                break
            step = steps.send(fit_size_model(pairs).to_estimate(target))
    except StopIteration:
        pass
    finally:
        steps.close()
    if unavailable:
        fail_closed(read_counted(attempt))
        outcome = "measurement_unavailable"
        return _finish(state, hooks, result, view, attempt, measured, calls, outcome, plan)
    if measured.input_tokens <= target and not measured.over_limit:
        return _finish(state, hooks, result, view, attempt, measured, calls, "target_reached", plan)
    if not measured.over_limit:
        return _finish(
            state, hooks, result, view, attempt, measured, calls, "protected_floor", plan
        )
    if fit_output is not None:
        fitted = await fit(fit_output, view, attempt)  # type: ignore[arg-type]
        if fitted is not None:
            relief, reading, extra = fitted
            calls += extra
            outcome = "reduced_output"
            return _finish(state, hooks, result, view, relief, reading, calls, outcome, plan)
    raise context_length_error(
        f"context-simple: the request is ~{measured.estimated_input_tokens} input tokens by the "
        f"provider's count and its limit is {measured.input_limit_tokens}, after every legal "
        "compaction step; shorten the system prompt, the first or latest prompt, or the "
        "retained reminders"
    )


def _step_view(
    planner: Planner,
    scope: Scope,
    step: Step,
    entry: Decisions,
    before: tuple[int, int],
    target: int,
) -> tuple[list[Any], int, CompactionStats, list[str]]:
    """The candidate view of one rung, its estimate, figures and repairs, from one render."""
    body = planner.render(scope, step.decisions)
    stats = planner.composer.statistics(
        scope, step, entry, before=before, after=body, target=target
    )
    view, tokens, body = planner.compose(scope, step.decisions, stats, body)
    return view, tokens, stats.as_shown(tokens), body.repaired


@dataclass(frozen=True, slots=True)
class _Staged:
    """What every plan of one measured call shares (as an ordinary request would record it)."""

    scope: Scope
    entry: Decisions
    meter_stats: MeterStats
    base_tokens: int
    rebased: bool = False
    """The walk started from no decisions (those in force were disproved)."""

    def plan(
        self,
        step: Step | None,
        stats: CompactionStats | None,
        view_tokens: int,
        repaired: list[str],
        pairs: list[tuple[int, int]],
    ) -> RequestPlan:
        # The counted view is the orchestrator's; the plan is sized on this walk's counts
        # (the first included: a view left whole is judged by its count, not our estimate).
        return request_plan(
            self.scope,
            self.entry,
            view=[],
            view_tokens=view_tokens,
            step=step,
            stats=stats,
            meter_stats=self.meter_stats,
            repaired=list(repaired),
            size_model=fit_size_model(pairs),
            covered=self.base_tokens,
            # Sized on the orchestrator's counts: real units, the held-back parts included.
            real_budget=self.scope.budget.request_budget,
            rebased=self.rebased and step is not None,
        )


def _finish(
    state: SessionState,
    hooks: object,
    result: dict[str, Any],
    view: list[Any],
    attempt: Mapping[str, Any],
    measured: Measurement | None,
    calls: int,
    outcome: str,
    plan: RequestPlan,
) -> dict[str, Any]:
    before = result["measured_before"]
    extra = {
        "outcome": outcome,
        "measured_before": before,
        "measured_after": None if measured is None else measured.input_tokens,
        "count_calls": calls,
        "measurement_source": None if measured is None else measured.source,
        "measured_tokens": before,
        "overhead_tokens": None if before is None else max(0, before - plan.covered),
    }
    if outcome == "measurement_unavailable":
        # Not counting at all is a choice (info); a count in the wrong shape is a bug (warning).
        level = logging.INFO if result["unusable_reason"] == NOT_COUNTED else logging.WARNING
        logger.log(level, "context-simple: measured request view: the provider's count is "
                   "unusable (%s); planned on the estimate", result["unusable_reason"])  # fmt: skip
    if outcome == "protected_floor":
        logger.warning(
            "context-simple: measured compaction stopped at the protected floor (%s tokens "
            "against a target of %s): protected content is larger than the target",
            extra["measured_after"],
            result["target"],
        )
    return {
        **result,
        "base_view": view,
        "final_attempt": attempt,
        "outcome": outcome,
        "measured_after": extra["measured_after"],
        "count_calls": calls,
        "transaction": MeasuredTransaction(state, hooks, plan, extra),
    }


async def _fallback(
    pipeline: Pipeline,
    scope: Scope,
    base_view: list[Any],
    attempt: Mapping[str, Any],
    calls: int,
    count_view: CountView,
    result: dict[str, Any],
) -> dict[str, Any]:
    """No usable provider count: plan on our estimate, count the result once for dispatch.

    The envelope that would be returned still fails closed when it is over the hard limit.
    """
    plan = pipeline.plan(scope, relax=False)
    view = base_view
    if plan.escalated is not None:
        view = plan.view
        attempt = await count_view(view)  # type: ignore[arg-type]
        calls += 1
    counted = read_counted(attempt)
    fail_closed(counted)
    reading = None if counted is None else counted.measurement
    outcome = "measurement_unavailable"
    state, hooks = pipeline.state, pipeline.host.hooks
    return _finish(state, hooks, result, view, attempt, reading, calls, outcome, plan)
