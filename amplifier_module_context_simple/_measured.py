"""The negotiated measured-request view (the ``context.measured_request_view`` capability).

The orchestrator owns the complete request (tools, overlays) and can have the provider count
it; we own the history. So we hand it candidate views, it counts each one, and we walk the
compaction ladder on the provider's own numbers: at most the original candidate plus one count
per rung that changes something. Nothing becomes sticky until the orchestrator commits the
returned transaction right before dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._budget import Budget
from ._decisions import CompactionStats, Decisions
from ._ladder import Step, plan_escalation
from ._retention import context_length_error, resolve_retained

if TYPE_CHECKING:
    from ._manager import RequestPlan, Scope, SimpleContextManager

logger = logging.getLogger(__name__)

CountView = Callable[[list[dict[str, Any]]], Awaitable[Mapping[str, Any]]]
FitOutput = Callable[[list[dict[str, Any]], Mapping[str, Any]], Awaitable[Mapping[str, Any] | None]]

OUTCOMES = (
    "not_needed",
    "target_reached",
    "protected_floor",
    "reduced_output",
    "measurement_unavailable",
)


@dataclass(frozen=True, slots=True)
class Measurement:
    source: str
    input_tokens: int
    estimated_input_tokens: int
    input_limit_tokens: int

    @property
    def over_limit(self) -> bool:
        return self.estimated_input_tokens > self.input_limit_tokens


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_envelope(envelope: object, *, what: str = "count_view") -> Measurement | None:
    """Validate a counted envelope; return its measurement when it is usable.

    A malformed envelope is the orchestrator's bug and raises ``TypeError``; a well-formed one
    without a usable provider count returns None (the estimate path takes over).
    """
    if not isinstance(envelope, Mapping) or "dispatch" not in envelope:
        raise TypeError(f"{what} must return a mapping with 'dispatch' and 'budget_decision'")
    if "budget_decision" not in envelope:
        raise TypeError(f"{what} result lacks 'budget_decision' (use None when not counted)")
    decision = envelope["budget_decision"]
    if decision is None:
        return None
    if not isinstance(decision, Mapping):
        raise TypeError(f"{what}: 'budget_decision' must be a mapping or None")
    for key in ("estimated_input_tokens", "input_limit_tokens", "measurement"):
        if key not in decision:
            raise TypeError(f"{what}: 'budget_decision' lacks {key!r}")
    measurement = decision["measurement"]
    if measurement is None:
        return None
    if not isinstance(measurement, Mapping):
        raise TypeError(f"{what}: 'measurement' must be a mapping or None")
    estimated, limit = decision["estimated_input_tokens"], decision["input_limit_tokens"]
    source, tokens = measurement.get("source"), measurement.get("input_tokens")
    usable = (
        measurement.get("kind") == "provider_count"
        and isinstance(source, str)
        and bool(source)
        and _is_count(tokens)
        and _is_count(estimated)
        and _is_count(limit)
        and estimated >= tokens  # type: ignore[operator]
    )
    if not usable:
        return None
    return Measurement(source, tokens, estimated, limit)  # type: ignore[arg-type]


class MeasuredTransaction:
    """Staged decisions of one measured call; the orchestrator commits right before dispatch."""

    def __init__(
        self,
        manager: SimpleContextManager,
        plan: RequestPlan | None,
        budget: Budget,
        extra: dict[str, Any],
    ) -> None:
        self._manager = manager
        self._plan = plan
        self._budget = budget
        self._extra = extra
        self._answer: bool | None = None

    @property
    def done(self) -> bool:
        return self._answer is not None

    def rollback(self) -> None:
        """Discard the staged decisions (idempotent; terminal)."""
        if self._answer is None:
            self._answer = False

    async def commit(self, *, is_cancelled: Callable[[], bool] | None = None) -> bool:
        """Make the staged decisions sticky and emit the staged event.

        Returns False, having rolled back, when the caller was cancelled or the state moved on
        underneath (another request escalated meanwhile). A second call repeats the answer.
        """
        if self._answer is not None:
            return self._answer
        manager = self._manager
        plan = self._plan
        stale = plan is not None and not manager.is_current(plan)
        if stale or (is_cancelled is not None and is_cancelled()):
            self._answer = False
            return False
        if plan is None:
            self._answer = True
            await manager._emit_budget(self._budget)  # pyright: ignore[reportPrivateUsage]
            return True
        # Cancelled here, nothing has changed yet and a retry may still commit.
        await manager._announce_compaction(plan)  # pyright: ignore[reportPrivateUsage]
        self._answer = manager._commit(plan)  # pyright: ignore[reportPrivateUsage]
        if self._answer:
            await manager._emit_compaction(plan, self._extra)  # pyright: ignore[reportPrivateUsage]
            await manager._emit_budget(plan.budget)  # pyright: ignore[reportPrivateUsage]
        return self._answer


async def get_measured_request_view(
    manager: SimpleContextManager,
    *,
    provider: Any,
    retain_contents: Iterable[str],
    count_view: CountView,
    fit_output: FitOutput | None = None,
) -> dict[str, Any]:
    if manager.token_meter != "actual":
        raise RuntimeError(
            "get_measured_request_view needs token_meter='actual' in the context-simple config"
        )
    retained = resolve_retained(manager.messages, retain_contents)
    budget = await manager._derive_budget(None, provider)  # pyright: ignore[reportPrivateUsage]
    factory_text = await manager._system_text()  # pyright: ignore[reportPrivateUsage]
    scope = manager._scope(  # pyright: ignore[reportPrivateUsage]
        budget, factory_text, retained=retained, protected_extra=_developer_positions(manager)
    )
    entry = manager._decisions  # pyright: ignore[reportPrivateUsage]
    return await _walk(manager, scope, entry, count_view, fit_output)


def _developer_positions(manager: SimpleContextManager) -> frozenset[int]:
    return frozenset(i for i, m in enumerate(manager.messages) if m.get("role") == "developer")


async def _walk(
    manager: SimpleContextManager,
    scope: Scope,
    entry: Decisions,
    count_view: CountView,
    fit_output: FitOutput | None,
) -> dict[str, Any]:
    policy_budget = scope.usable
    trigger = int(manager.compact_threshold * policy_budget)
    target = int(manager.target_usage * policy_budget)
    stats = manager._compaction_stats  # pyright: ignore[reportPrivateUsage]
    base_view, base_tokens, _ = manager._compose(scope, entry, stats)  # pyright: ignore[reportPrivateUsage]
    attempt = await count_view(base_view)  # type: ignore[arg-type]
    calls = 1
    first = read_envelope(attempt)
    result: dict[str, Any] = {
        "policy_budget": policy_budget,
        "trigger": trigger,
        "target": target,
        "measured_before": None if first is None else first.input_tokens,
    }
    if first is None:
        return await _fallback(manager, scope, base_view, attempt, calls, count_view, result)
    measured = first
    if measured.input_tokens < trigger and not measured.over_limit:
        return _finish(
            manager, result, base_view, attempt, measured, calls, "not_needed", None, scope.budget
        )

    steps = plan_escalation(
        manager._index,  # pyright: ignore[reportPrivateUsage]
        entry,
        usage=base_tokens,
        target=_estimate_target(target, base_tokens, measured.input_tokens),
        policy=manager.ladder_policy(),
        retained=scope.retained,
        protected_extra=scope.protected_extra,
        open_tail=scope.open_tail,
    )
    chosen: Step | None = None
    chosen_stats: CompactionStats | None = None
    view, view_tokens = base_view, base_tokens
    try:
        step = next(steps)
        while True:
            view, view_tokens, stats = _step_view(
                manager, scope, step, entry, (base_tokens, len(base_view)), target
            )
            attempt = await count_view(view)  # type: ignore[arg-type]
            calls += 1
            reading = read_envelope(attempt)
            if reading is None:
                raise context_length_error(
                    "context-simple: the provider count became unavailable in the middle of "
                    "measured compaction; refusing to dispatch an unmeasured request"
                )
            measured, chosen, chosen_stats = reading, step, stats
            if measured.input_tokens <= target and not measured.over_limit:
                break
            step = steps.send(_estimate_target(target, view_tokens, measured.input_tokens))
    except StopIteration:
        pass
    finally:
        steps.close()
    plan = (
        None
        if chosen is None or chosen_stats is None
        else _plan_for(manager, scope, chosen, chosen_stats, view, view_tokens, entry)
    )
    if measured.input_tokens <= target and not measured.over_limit:
        return _finish(
            manager, result, view, attempt, measured, calls, "target_reached", plan, scope.budget
        )
    if not measured.over_limit:
        return _finish(
            manager, result, view, attempt, measured, calls, "protected_floor", plan, scope.budget
        )
    if fit_output is not None:
        relief = await fit_output(view, attempt)  # type: ignore[arg-type]
        if relief is not None:
            fitted = _read_fitted(relief)
            result_calls = calls + relief["count_calls"]
            return _finish(
                manager,
                result,
                view,
                relief,
                fitted,
                result_calls,
                "reduced_output",
                plan,
                scope.budget,
            )
    raise context_length_error(
        f"context-simple: the request is ~{measured.estimated_input_tokens} input tokens by the "
        f"provider's count and its limit is {measured.input_limit_tokens}, after every legal "
        "compaction step; shorten the system prompt, the first or latest prompt, or the "
        "retained reminders"
    )


def _estimate_target(target: int, view_tokens: int, measured: int) -> int:
    """The target in our estimate's units, scaled by how our estimate compares to the count."""
    if measured <= 0:
        return target
    return int(target * view_tokens / measured)


def _read_fitted(relief: Mapping[str, Any]) -> Measurement:
    reading = read_envelope(relief, what="fit_output")
    calls = relief.get("count_calls")
    if not (isinstance(calls, int) and not isinstance(calls, bool) and calls > 0):
        raise TypeError("fit_output result needs a positive int 'count_calls'")
    if reading is None:
        raise TypeError("fit_output result carries no usable provider measurement")
    if reading.over_limit:
        raise context_length_error(
            "context-simple: even with a smaller output allowance the request exceeds the "
            f"provider's input limit ({reading.estimated_input_tokens} > "
            f"{reading.input_limit_tokens})"
        )
    return reading


def _step_view(
    manager: SimpleContextManager,
    scope: Scope,
    step: Step,
    entry: Decisions,
    before: tuple[int, int],
    target: int,
) -> tuple[list[Any], int, CompactionStats]:
    """The candidate view of one rung, its estimate and its figures, from one render."""
    body = manager._render(step.decisions, scope.open_tail, scope.retained)  # pyright: ignore[reportPrivateUsage]
    stats = manager._stats(  # pyright: ignore[reportPrivateUsage]
        step,
        entry,
        before=before,
        after=(scope.system_tokens + body.tokens, len(scope.systems) + len(body.messages)),
        systems=len(scope.systems),
        budget=scope.usable,
        target=target,
    )
    view, tokens, _ = manager._compose(scope, step.decisions, stats, body)  # pyright: ignore[reportPrivateUsage]
    return view, tokens, stats


def _plan_for(
    manager: SimpleContextManager,
    scope: Scope,
    step: Step,
    stats: CompactionStats,
    view: list[Any],
    view_tokens: int,
    entry: Decisions,
) -> RequestPlan:
    from ._manager import RequestPlan
    from ._meter import choose_usage

    return RequestPlan(
        budget=scope.budget,
        view=view,
        view_tokens=view_tokens,
        decisions=step.decisions,
        escalated=step,
        stats=stats,
        meter_stats=choose_usage(
            mode=manager.token_meter,
            estimated=view_tokens,
            meter=manager.meter,
            budget=scope.usable,
            view_has_images=False,
        ),
        usable_budget=scope.usable,
        base=entry,
        epoch=scope.epoch,
    )


def _finish(
    manager: SimpleContextManager,
    result: dict[str, Any],
    view: list[Any],
    attempt: Mapping[str, Any],
    measured: Measurement | None,
    calls: int,
    outcome: str,
    plan: RequestPlan | None,
    budget: Budget,
) -> dict[str, Any]:
    extra = {
        "outcome": outcome,
        "measured_before": result["measured_before"],
        "measured_after": None if measured is None else measured.input_tokens,
        "count_calls": calls,
        "measurement_source": None if measured is None else measured.source,
    }
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
        "transaction": MeasuredTransaction(manager, plan, budget, extra),
    }


async def _fallback(
    manager: SimpleContextManager,
    scope: Scope,
    base_view: list[Any],
    attempt: Mapping[str, Any],
    calls: int,
    count_view: CountView,
    result: dict[str, Any],
) -> dict[str, Any]:
    """No usable provider count: plan on our estimate, count the result once for dispatch."""
    plan = manager._build_plan(scope, False, relax=False)  # pyright: ignore[reportPrivateUsage]
    view = base_view
    if plan.escalated is not None:
        view = plan.view
        attempt = await count_view(view)  # type: ignore[arg-type]
        calls += 1
    reading = read_envelope(attempt)
    return _finish(
        manager,
        result,
        view,
        attempt,
        reading,
        calls,
        "measurement_unavailable",
        plan if plan.escalated is not None else None,
        scope.budget,
    )


__all__ = ["OUTCOMES", "MeasuredTransaction", "get_measured_request_view", "read_envelope"]
