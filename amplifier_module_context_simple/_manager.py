"""``SimpleContextManager``: the one stateful shell around the pure pieces.

State it owns: the canonical messages, the sticky decisions and the statistics of the latest
escalation, the token meter, and the last ``context:budget`` payload emitted. A request
computes everything first, announces an escalation (``context:pre_compact``), then changes
state in one synchronous step before ``context:compaction`` goes out; a failure or
cancellation before that step leaves nothing behind.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from . import _events as events
from . import _measured, _retention
from ._budget import Budget, BudgetEventGate, derive_budget
from ._config import ContextConfig
from ._decisions import NO_DECISIONS, CompactionStats, Decisions
from ._diagnostics import Diagnostics
from ._estimate import estimate_message_tokens, family_for_model
from ._history import HistoryIndex
from ._ingress import clip_tool_result
from ._ladder import LadderPolicy, Step, plan_escalation
from ._messages import validate_message
from ._meter import IDENTITY, MeterStats, SizeModel, TokenMeter, choose_usage
from ._render import (
    NoticeFigures,
    RenderResult,
    notice,
    notice_message,
    open_tail_call,
    system_part,
)
from ._view_cache import PrefixCache

logger = logging.getLogger(__name__)

SystemPromptFactory = Callable[[], Awaitable[str] | str]


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
    """What the longest notice this history can get takes (0 when none would be shown)."""


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    decisions: Decisions
    stats: CompactionStats | None
    meter: object
    meter_stats: dict[str, Any] | None
    budget_gate: dict[str, Any] | None


class SimpleContextManager:
    """Holds a session's messages and hands out views that fit the model's window.

    The constructor takes every configuration key as a keyword (same names and defaults as the
    mount config) and keeps each value readable as an attribute of the same name.
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_tokens_fallback: int = 200_000,
        compact_threshold: float = 0.92,
        target_usage: float = 0.50,
        protected_recent: float = 0.30,
        protected_tool_results: int = 5,
        truncate_chars: int = 250,
        compaction_notice_enabled: bool = True,
        compaction_notice_token_reserve: int = 800,
        compaction_notice_verbosity: str = "normal",
        compaction_notice_min_level: int = 1,
        output_reserve_fraction: float = 0.5,
        token_meter: str = "estimate",
        max_tool_result_bytes: int = 131_072,
        token_family: str | None = None,
        hooks: Any = None,
    ) -> None:
        config = ContextConfig.from_mapping(
            {
                "max_tokens": max_tokens,
                "max_tokens_fallback": max_tokens_fallback,
                "compact_threshold": compact_threshold,
                "target_usage": target_usage,
                "protected_recent": protected_recent,
                "protected_tool_results": protected_tool_results,
                "truncate_chars": truncate_chars,
                "compaction_notice_enabled": compaction_notice_enabled,
                "compaction_notice_token_reserve": compaction_notice_token_reserve,
                "compaction_notice_verbosity": compaction_notice_verbosity,
                "compaction_notice_min_level": compaction_notice_min_level,
                "output_reserve_fraction": output_reserve_fraction,
                "token_meter": token_meter,
                "max_tool_result_bytes": max_tool_result_bytes,
                "token_family": token_family,
            }
        )
        self.config = config
        for key, value in asdict(config).items():
            setattr(self, key, value)
        self.hooks = hooks
        self.messages: list[dict[str, Any]] = []
        self._index = HistoryIndex(estimate_message_tokens, json_cap=config.max_tool_result_bytes)
        self._decisions: Decisions = NO_DECISIONS
        self._compaction_stats: CompactionStats | None = None
        self._meter = TokenMeter()
        self._budget_gate = BudgetEventGate()
        self._last_token_meter_stats: dict[str, Any] | None = None
        self._system_prompt_factory: SystemPromptFactory | None = None
        self._render_cache = PrefixCache()
        self._diagnostics = Diagnostics()
        self._epoch = 0
        self._factory_cache: tuple[object, int] = (None, 0)
        self._notice_cost_cache: tuple[object, int] = (None, 0)

    # Attribute declarations for type checkers (set from the config in __init__).
    max_tokens: int | None
    max_tokens_fallback: int
    compact_threshold: float
    target_usage: float
    protected_recent: float
    protected_tool_results: int
    truncate_chars: int
    compaction_notice_enabled: bool
    compaction_notice_token_reserve: int
    compaction_notice_verbosity: str
    compaction_notice_min_level: int
    output_reserve_fraction: float
    token_meter: str
    max_tool_result_bytes: int
    token_family: str | None

    # ------------------------------------------------------------------ history

    async def add_message(self, message: dict[str, Any]) -> None:
        """Admit one message; a structurally broken one is refused before anything is stored."""
        stored, clip = self._admit(message, len(self.messages))
        self.messages.append(stored)
        if clip is not None:
            await events.safe_emit(self.hooks, events.INGRESS_TRUNCATED, clip)

    async def get_messages(self) -> list[dict[str, Any]]:
        """The whole canonical history, as a new list."""
        return list(self.messages)

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        """Replace the history (session resume). All-or-nothing: one bad message refuses all."""
        if not isinstance(messages, list | tuple):
            raise TypeError(
                f"set_messages expects a list of messages, got {type(messages).__name__}"
            )
        admitted = [self._admit(m, i) for i, m in enumerate(messages)]
        self._reset_derived()
        self.messages = [stored for stored, _ in admitted]
        for _, clip in admitted:
            if clip is not None:
                await events.safe_emit(self.hooks, events.INGRESS_TRUNCATED, clip)

    async def clear(self) -> None:
        """Empty the history and forget everything derived from it."""
        self.messages = []
        self._reset_derived()

    def _reset_derived(self) -> None:
        self._epoch += 1
        self._index.reset()
        self._decisions = NO_DECISIONS
        self._compaction_stats = None
        self._meter.reset()
        self._last_token_meter_stats = None
        self._render_cache.clear()
        self._diagnostics = Diagnostics()

    def _admit(
        self, message: Mapping[str, Any], index: int
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        validate_message(message, index)
        stored = dict(message)
        metadata = dict(stored.get("metadata") or {})
        if "timestamp" not in metadata:
            metadata["timestamp"] = _utc_timestamp()
        stored["metadata"] = metadata
        clipped, clip = clip_tool_result(stored, self.max_tool_result_bytes)
        if clip is None:
            return stored, None
        return clipped, clip.payload()

    # ------------------------------------------------------------------ requests

    async def set_system_prompt_factory(self, factory: SystemPromptFactory | None) -> None:
        """Register an async callable whose text becomes the view's first system message."""
        self._system_prompt_factory = factory

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        """The provider-facing view for the next request (a new list, history unchanged).

        Protection wins over the target here: when protected content alone is too large the
        view is returned anyway, with a warning. Orchestrators that want a hard ceiling use
        ``get_messages_for_request_retaining(..., hard_fit=True)``, which fails closed.
        """
        plan = await self._plan_request(token_budget=token_budget, provider=provider)
        return await self._deliver(plan)

    async def get_messages_for_request_retaining(
        self,
        *,
        retain_contents: Iterable[str],
        provider: Any = None,
        token_budget: int | None = None,
        hard_fit: bool = False,
    ) -> list[dict[str, Any]]:
        """A view that keeps the named reminder envelopes whole (``context.request_retention``).

        ``hard_fit`` targets the budget itself instead of ``target_usage``. Raises
        ``ValueError`` for a body that was never admitted and ``ContextLengthError`` when the
        required set cannot fit; either way nothing changes.
        """
        return await _retention.get_messages_for_request_retaining(
            self,
            retain_contents=retain_contents,
            provider=provider,
            token_budget=token_budget,
            hard_fit=hard_fit,
        )

    async def get_measured_request_view(
        self,
        *,
        provider: Any,
        retain_contents: Iterable[str],
        count_view: _measured.CountView,
        fit_output: _measured.FitOutput | None = None,
    ) -> dict[str, Any]:
        """Walk the ladder on the orchestrator's provider counts (``token_meter='actual'``)."""
        return await _measured.get_measured_request_view(
            self,
            provider=provider,
            retain_contents=retain_contents,
            count_view=count_view,
            fit_output=fit_output,
        )

    def _estimate_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Estimated tokens of ``messages`` (kept for subclasses that call it)."""
        return sum(self._index.estimate(m) for m in messages)

    @property
    def token_meter_stats(self) -> dict[str, Any] | None:
        """Meter statistics of the latest request (read-only copy)."""
        stats = self._last_token_meter_stats
        return None if stats is None else dict(stats)

    @property
    def compaction_level(self) -> int:
        return self._decisions.level

    @property
    def compaction_stats(self) -> dict[str, Any] | None:
        stats = self._compaction_stats
        return None if stats is None else stats.payload()

    @property
    def meter(self) -> TokenMeter:
        return self._meter

    def claim_foreground_usage(self) -> Callable[..., bool]:
        """For an orchestrator that owns the token count: returns its usage recorder."""
        return self._meter.claim_foreground_usage()

    async def _system_text(self) -> str | None:
        factory = self._system_prompt_factory
        if factory is None:
            return None
        text = factory()
        if inspect.isawaitable(text):
            text = await text
        if not isinstance(text, str):
            # Sending "None" as the system prompt would silently replace the real one.
            raise TypeError(
                "the system prompt factory must return a string, it returned "
                f"{type(text).__name__}: {text!r:.80}"
            )
        return text

    async def _derive_budget(self, token_budget: int | None, provider: Any) -> Budget:
        return await derive_budget(
            token_budget=token_budget,
            provider=provider,
            max_tokens=self.max_tokens,
            max_tokens_fallback=self.max_tokens_fallback,
            output_reserve_fraction=self.output_reserve_fraction,
        )

    async def _plan_request(
        self,
        *,
        token_budget: int | None,
        provider: Any,
        retained: frozenset[int] = frozenset(),
        hard_fit: bool = False,
    ) -> RequestPlan:
        budget = await self._derive_budget(token_budget, provider)
        factory_text = await self._system_text()
        # Nothing below awaits: from here the request sees one consistent history.
        return self._build_plan(self._scope(budget, factory_text, retained=retained), hard_fit)

    def _scope(
        self,
        budget: Budget,
        factory_text: str | None,
        *,
        retained: frozenset[int] = frozenset(),
        protected_extra: frozenset[int] = frozenset(),
    ) -> Scope:
        """Index the history and fix what one request's views are built from."""
        family = self.token_family or family_for_model(budget.model_name)
        index = self._index
        index.sync(self.messages, family)
        stored = [index.facts[i] for i in index.system_positions]
        systems = system_part(stored, factory_text)
        known = {id(f.sent): f.tokens for f in stored}
        open_tail = open_tail_call(index)
        return Scope(
            budget=budget,
            systems=systems,
            system_tokens=sum(known.get(id(m)) or self._factory_tokens(m) for m in systems),
            usable=self._usable_budget(budget.effective_budget),
            open_tail=open_tail,
            retained=retained,
            protected_extra=protected_extra,
            epoch=self._epoch,
            notice_cost=self._notice_cost() if open_tail is None else 0,
        )

    def _notice_cost(self) -> int:
        """Tokens the longest notice this history could get takes (0 with notices off)."""
        if not self.compaction_notice_enabled:
            return 0
        size = len(self._index.facts)
        key = (len(str(size + 1000)), self.compaction_notice_verbosity, self._index.family)
        if self._notice_cost_cache[0] != key:
            largest = NoticeFigures.largest(size)
            cost = max(
                self._index.estimate(notice_message(figures, self.compaction_notice_verbosity))
                for figures in (largest, replace(largest, relaxed=False))
            )
            self._notice_cost_cache = (key, cost)
        return self._notice_cost_cache[1]

    def _factory_tokens(self, message: Mapping[str, Any]) -> int:
        key = (message.get("content"), self._index.family)
        if self._factory_cache[0] != key:
            self._factory_cache = (key, self._index.estimate(message))
        return self._factory_cache[1]

    def _compose(
        self,
        scope: Scope,
        decisions: Decisions,
        stats: CompactionStats | None,
        body: RenderResult | None = None,
    ) -> tuple[list[Mapping[str, Any]], int, RenderResult]:
        """The notice-inclusive view for ``decisions``, its estimate and the rendered body."""
        if body is None:
            body = self._render(decisions, scope.open_tail, scope.retained)
        view = [*scope.systems, *body.messages]
        tokens = scope.system_tokens + body.tokens
        if (
            self.compaction_notice_enabled
            and stats is not None
            and not decisions.empty
            and decisions.level >= self.compaction_notice_min_level
            and scope.open_tail is None
        ):
            reminder = notice(stats, decisions, self.compaction_notice_verbosity)
            view.append(reminder)
            tokens += self._index.estimate(reminder)
        return view, tokens, body

    def _build_plan(self, scope: Scope, hard_fit: bool, *, relax: bool = True) -> RequestPlan:
        """Plan one request on our estimate: escalate past the trigger, else render as is.

        ``relax`` lets a fit pass give up protection when the rungs leave the view over the
        budget (the plain and retention paths; the measured path keeps the eight rungs).
        """
        usable, retained = scope.usable, scope.retained
        decisions = self._decisions
        stats = self._compaction_stats
        body = self._render(decisions, scope.open_tail, retained)
        estimate = scope.system_tokens + body.tokens
        # The view as it goes out when nothing escalates; readings answer whole views.
        view, view_tokens, body = self._compose(scope, decisions, stats, body)
        meter_stats = choose_usage(
            mode=self.token_meter,
            estimated=estimate,
            view_estimate=view_tokens,
            meter=self._meter,
            budget=usable,
            view_has_images=self._index.image_messages > 0,
        )
        model = self._size_model(view_tokens)
        trigger = self.compact_threshold * usable
        # The ladder works in estimate units: the budget (the notice included) and the target
        # are real figures, converted through the model of what a request really costs.
        limit = model.to_estimate(scope.budget.effective_budget) - scope.notice_cost
        if hard_fit:
            target, real_target = limit, model.to_real(max(limit, 0))
        else:
            real_target = int(self.target_usage * usable)
            target = model.to_estimate(real_target)
        step: Step | None = None
        over = meter_stats.used >= trigger
        if over or estimate > limit:
            step = self._escalate(
                decisions, estimate, target, scope, limit=limit if relax else None
            )
        if step is not None:
            before_messages = len(scope.systems) + len(body.messages)
            previous, decisions = decisions, step.decisions
            body = after = self._render(decisions, scope.open_tail, retained)
            stats = self._stats(
                step,
                previous,
                before=(estimate, before_messages),
                after=(
                    scope.system_tokens + after.tokens,
                    len(scope.systems) + len(after.messages),
                ),
                systems=len(scope.systems),
                budget=usable,
                target=real_target,
                measured=_measured_figures(meter_stats),
            )
            view, view_tokens, body = self._compose(scope, decisions, stats, body)
        return RequestPlan(
            budget=scope.budget,
            view=view,
            view_tokens=view_tokens,
            decisions=decisions,
            escalated=step,
            stats=stats if step is not None else None,
            meter_stats=meter_stats,
            usable_budget=usable,
            base=self._decisions,
            epoch=scope.epoch,
            system_tokens=scope.system_tokens,
            repaired=body.repaired,
            size_model=model,
            covered=meter_stats.view_estimate,
            stuck=over and step is None and meter_stats.source == "actual",
        )

    def _size_model(self, estimate: int) -> SizeModel:
        """The real-size model in force for a view estimated at ``estimate`` (see ``_meter``).

        The identity in estimate mode. Convert a real-unit figure (a target, a limit) into
        the ladder's estimate units with ``.to_estimate(real)``.
        """
        if self.token_meter != "actual":
            return IDENTITY
        return self._meter.size_model_for(estimate)

    def _usable_budget(self, effective: int) -> int:
        return self.config.usable_budget(effective)

    def _escalate(
        self,
        decisions: Decisions,
        estimate: int,
        target: int,
        scope: Scope,
        *,
        limit: int | None = None,
    ) -> Step | None:
        """The last rung that changed something on the way to ``target`` (estimate units)."""
        last: Step | None = None
        for step in plan_escalation(
            self._index,
            decisions,
            usage=estimate,
            target=target,
            policy=self.ladder_policy(),
            retained=scope.retained,
            protected_extra=scope.protected_extra,
            open_tail=scope.open_tail,
            limit=limit,
        ):
            last = step
        # The planner yields only rungs that changed something: with nothing new to reduce
        # there is no step, and so no storm of identical escalations.
        return last

    def ladder_policy(self) -> LadderPolicy:
        return LadderPolicy(self.protected_recent, self.protected_tool_results, self.truncate_chars)

    def _stats(
        self,
        step: Step,
        previous: Decisions,
        *,
        before: tuple[int, int],
        after: tuple[int, int],
        systems: int,
        budget: int,
        target: int,
        measured: tuple[int | None, int | None] = (None, None),
    ) -> CompactionStats:
        return CompactionStats.of_escalation(
            step.decisions,
            previous,
            level=step.level,
            before=before,
            after=after,
            systems=systems,
            budget=budget,
            target=target,
            protected_recent=self.protected_recent,
            protected_tool_results=self.protected_tool_results,
            history_messages=len(self._index.facts),
            relaxed=(step.results_shortened, step.groups_removed),
            measured_tokens=measured[0],
            overhead_tokens=measured[1],
        )

    def _render(
        self, decisions: Decisions, open_tail: int | None, retained: frozenset[int]
    ) -> RenderResult:
        """Render the non-system history, reusing the stable prefix of the previous render."""
        return self._render_cache.render(
            self._index,
            decisions,
            open_tail=open_tail,
            retained=retained,
            keep_chars=self.truncate_chars,
        )

    # ------------------------------------------------------------------ delivery

    def snapshot(self) -> StateSnapshot:
        """Everything a failed request must put back (history is never changed by one)."""
        return StateSnapshot(
            decisions=self._decisions,
            stats=self._compaction_stats,
            meter=self._meter.snapshot(),
            meter_stats=self._last_token_meter_stats,
            budget_gate=self._budget_gate.snapshot(),
        )

    def restore(self, snapshot: StateSnapshot) -> None:
        self._decisions = snapshot.decisions
        self._compaction_stats = snapshot.stats
        self._meter.restore(snapshot.meter)
        self._last_token_meter_stats = snapshot.meter_stats
        self._budget_gate.restore(snapshot.budget_gate)

    def is_current(self, plan: RequestPlan) -> bool:
        """Whether ``plan`` was made for the history and decisions in force right now.

        A request that was suspended (a slow hook) while the history was replaced, or while
        a newer request escalated, must not write its older decisions over the new state.
        """
        return plan.epoch == self._epoch and plan.base is self._decisions

    def _commit(self, plan: RequestPlan) -> bool:
        """Make the plan's decisions sticky (synchronous: no await can split it).

        Returns False, changing nothing, when the plan is no longer current.
        """
        if not self.is_current(plan):
            return False
        if plan.escalated is not None:
            self._decisions = plan.decisions
            self._compaction_stats = plan.stats
        self._last_token_meter_stats = plan.meter_stats.as_dict()
        self._meter.anchor_estimate(plan.covered)
        self._meter.note_request_estimate(plan.view_tokens)
        self._diagnostics.report_repairs(plan.repaired)
        model = plan.size_model
        self._diagnostics.warn_if_over_budget(
            self._decisions,
            view_tokens=model.to_real(plan.view_tokens),
            budget=plan.budget.effective_budget,
        )
        if plan.escalated is not None and plan.stats is not None:
            self._diagnostics.warn_if_above_target(
                self._decisions,
                view_tokens=model.to_real(plan.stats.after_tokens),
                system_tokens=plan.system_tokens,
                target=plan.stats.target_tokens,
                overhead=model.overhead,
            )
        if plan.stuck:
            self._diagnostics.warn_outside_context(
                measured=plan.meter_stats.used,
                overhead=model.overhead,
                budget=plan.usable_budget,
            )
        return True

    @property
    def view_repairs(self) -> tuple[str, ...]:
        """What the latest view repaired or projected, one ``"kind: detail"`` string each.

        Kinds come from ``REPAIR_KINDS``: pairing repairs (placeholders added, orphan or stray
        results left out) and projections onto the host's model (images, calls, ids...).
        """
        return self._diagnostics.repairs

    async def _announce_compaction(self, plan: RequestPlan) -> None:
        """``context:pre_compact``: before the commit, so a cancellation here changes nothing."""
        if plan.escalated is None or plan.stats is None:
            return
        stats = plan.stats
        await events.safe_emit(
            self.hooks,
            events.PRE_COMPACT,
            {
                "before_tokens": stats.before_tokens,
                "before_messages": stats.before_messages,
                "budget": stats.budget,
            },
        )

    async def _emit_compaction(
        self, plan: RequestPlan, extra: Mapping[str, Any] | None = None
    ) -> None:
        """``context:compaction`` then ``context:post_compact``, after the commit."""
        if plan.escalated is None or plan.stats is None:
            return
        payload = {**plan.stats.payload(), **(extra or {})}
        await events.safe_emit(self.hooks, events.COMPACTION, payload)
        await events.safe_emit(
            self.hooks,
            events.POST_COMPACT,
            {
                "after_tokens": payload["after_tokens"],
                "after_messages": payload["after_messages"],
                "strategy_level": payload["strategy_level"],
            },
        )

    async def _emit_budget(self, budget: Budget) -> None:
        payload = budget.payload()
        if not self._budget_gate.changed(payload):
            return
        previous = self._budget_gate.snapshot()
        self._budget_gate.mark_emitted(payload)  # before the await: one delivery per change
        if not await events.safe_emit(self.hooks, events.BUDGET, payload):
            self._budget_gate.restore(previous)

    async def _deliver(self, plan: RequestPlan) -> list[dict[str, Any]]:
        if self.is_current(plan):
            await self._announce_compaction(plan)
        if self._commit(plan):
            await self._emit_compaction(plan)
        await self._emit_budget(plan.budget)
        return plan.view  # type: ignore[return-value]


def _measured_figures(stats: MeterStats) -> tuple[int | None, int | None]:
    """(``measured_tokens``, ``overhead_tokens``) for the compaction payload."""
    if stats.source != "actual":
        return None, None
    return stats.used, stats.overhead


def _utc_timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
