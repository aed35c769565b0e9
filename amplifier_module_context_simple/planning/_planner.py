"""The request planner: (history, decisions in force, config, budget, meter) -> ``RequestPlan``.

A plan is everything one request computes before it touches state or emits anything. The
planner builds it in seven passes, always in this order:

1. **budget** - the effective budget is the window less the output the provider will ask
   for, the safety margin, the tool definitions the request carries and the overhead the
   readings learned (``_budget``); the usable budget is that minus the notice reserve, and the
   notice cost is what the longest notice this history could get takes. They come first
   because the trigger and the target are shares of the usable budget, and the hard limit
   leaves room for the notice the escalation would add.
2. **scope** - sync the history index, fix the system part (the factory's text included),
   the open tail call, the retained envelopes and the extra protected positions. Every
   candidate view of the request shares it.
3. **render** - the view body under the decisions in force, with the view's projections onto
   the host's model and its id repairs (from the prefix cache: only new messages render).
4. **usage** - the figure the trigger compares (our estimate, or the meter's reading plus
   modelled growth) and the real-size model. Calibration comes before the target because the
   target and the limit are real figures converted into estimate units through that model.
5. **escalation** - past the trigger, over the hard limit or at a turn start that needs it
   (``_timing``) the ladder walks its rungs to the target, then (plain and retention paths)
   the fit pass relaxes protection down to the floor while the view is still over the limit.
6. **statistics** - the figures of the escalation (before, after, target, what was relaxed),
   from a render of the new decisions (``_compose``).
7. **compose** - systems, body and notice, last: the notice states the statistics (the view
   without escalation is composed before usage too: readings answer whole views).

The planner owns only caches (the rendered prefix, the factory's token count; its composer
the notice's count, the notice itself while it reads the same and its slot); it never reads or
writes session state. Its plans are built by ``request_plan`` (``_plan``), the one constructor.
"""

from __future__ import annotations

__all__ = ["Planner"]

from collections.abc import Generator, Mapping
from dataclasses import replace
from typing import Any

from ..history._history import HistoryIndex
from ..readings._meter import IDENTITY, SizeModel, TokenMeter
from ..readings._meter_stats import MeterStats, choose_usage
from ..sizing._budget import Budget, derive_budget
from ..sizing._estimate import family_for_model
from ..sizing._room import disproved
from ..sizing._tool_definitions import ToolDefinitions
from ..views._decisions import NO_DECISIONS, CompactionStats, Decisions
from ..views._ladder import LadderPolicy, Step, plan_escalation
from ..views._render import RenderResult, ShortForms, open_tail_call, system_part
from ..views._view_cache import PrefixCache
from ._compose import Composer
from ._config import ContextConfig
from ._plan import RequestPlan, Scope, request_plan
from ._system_prompt import SystemPrompt
from ._thresholds import Thresholds, thresholds
from ._timing import Timing, escalation_timing, leaves_room_for_turn, moment_of, turn_start_policy


class Planner:
    """Plans requests over one history index with one configuration (see the module doc)."""

    def __init__(self, config: ContextConfig, index: HistoryIndex) -> None:
        self.config = config
        self.index = index
        self.system_prompt = SystemPrompt()
        self.tools = ToolDefinitions()
        """The tool definitions every request carries (held back from the budget)."""
        self.policy = LadderPolicy(
            config.protected_recent, config.protected_tool_results, config.truncate_chars
        )
        self.forms = ShortForms(index)
        """The estimates of shortened forms, kept while the index's facts hold: every
        escalation, render and notice slot weighs a shortened message once."""
        self._prefix = PrefixCache(self.forms)
        self._last_scope: tuple[tuple[object, ...], Scope] | None = None
        self.composer = Composer(config, index, self.forms)
        """Passes 6 and 7: the figures of an escalation and the view that states them."""

    @property
    def rendered_messages(self) -> int:
        """History messages the planner has rendered so far (for views and the notice's place)."""
        return self._prefix.rendered + self.composer.rendered

    def reset(self) -> None:
        """A new history: drop the rendered prefix and the last scope."""
        self._prefix.clear()
        self._last_scope = None

    # ---------------------------------------------------------------- 1. budget

    async def inputs(
        self,
        token_budget: int | None,
        provider: Any,
        meter: TokenMeter | None = None,
        requested_output: int | None = None,
    ) -> tuple[Budget, str | None]:
        """The awaited inputs of a request: its budget and the system prompt factory's text.

        ``meter`` supplies the learned overhead (none without one).
        """
        config = self.config
        learned = 0 if meter is None else meter.held_overhead(config.token_meter)

        def held_back(model_name: str | None) -> tuple[int, int]:
            return self.tools.tokens(self.family(model_name)), learned

        budget = await derive_budget(
            token_budget=token_budget,
            provider=provider,
            max_tokens=config.max_tokens,
            max_tokens_fallback=config.max_tokens_fallback,
            output_reserve_fraction=config.output_reserve_fraction,
            requested_output=requested_output,
            held_back=held_back,
        )
        return budget, await self.system_prompt.text()

    def family(self, model_name: str | None) -> str | None:
        """The tokenizer family of a request for ``model_name`` (the configured one first)."""
        return self.config.token_family or family_for_model(model_name)

    # ---------------------------------------------------------------- 2. scope

    def scope(
        self,
        messages: list[dict[str, Any]],
        budget: Budget,
        factory_text: str | None,
        *,
        epoch: int = 0,
        retained: frozenset[int] = frozenset(),
        protected_extra: frozenset[int] = frozenset(),
    ) -> Scope:
        """Index the history and fix what one request's views are built from."""
        self.index.sync(messages, self.family(budget.model_name))
        return self.scope_here(
            budget, factory_text, epoch=epoch, retained=retained, protected_extra=protected_extra
        )

    def scope_here(
        self,
        budget: Budget,
        factory_text: str | None,
        *,
        epoch: int = 0,
        retained: frozenset[int] = frozenset(),
        protected_extra: frozenset[int] = frozenset(),
    ) -> Scope:
        """The scope of a request over the history as indexed now (no sync).

        The last scope is reused while everything it is built from is the same: a resume's
        walk asks at every request point of the history, and the history's system messages,
        its open tail and the notice's cost seldom change from one point to the next.
        """
        index = self.index
        open_tail = open_tail_call(index)
        notice_cost = (
            self.composer.notice_cost() if open_tail is None or self.composer.in_place else 0
        )
        positions = index.system_positions
        # The generation changes whenever an indexed message does (a rewrite, another
        # tokenizer family): the stored system messages may then be others, of equal count.
        key = (budget, factory_text, epoch, retained, protected_extra, index.generation,
               len(positions), open_tail, notice_cost)  # fmt: skip
        if self._last_scope is not None and self._last_scope[0] == key:
            return self._last_scope[1]
        stored = [index.facts[i] for i in positions]
        systems = system_part(stored, self.system_prompt.message(factory_text))
        known = {id(f.sent): f.tokens for f in stored}
        scope = Scope(
            budget=budget,
            systems=systems,
            system_tokens=sum(
                known.get(id(m)) or self.system_prompt.tokens(m, index) for m in systems
            ),
            usable=thresholds(self.config, budget.effective_budget, notice_cost).usable,
            open_tail=open_tail,
            retained=retained,
            protected_extra=protected_extra,
            epoch=epoch,
            notice_cost=notice_cost,
        )
        self._last_scope = (key, scope)
        return scope

    # ---------------------------------------------------------------- 3. render

    def render(self, scope: Scope, decisions: Decisions) -> RenderResult:
        """Render the non-system history, reusing the stable prefix of the previous render."""
        return self._prefix.render(
            self.index,
            decisions,
            open_tail=scope.open_tail,
            retained=scope.retained,
            keep_chars=self.config.truncate_chars,
        )

    def body_tokens(self, scope: Scope, decisions: Decisions) -> int:
        """The estimate of the body ``render`` would give, without building its list (a
        scope with no open tail and nothing retained)."""
        return self._prefix.tokens(self.index, decisions, keep_chars=self.config.truncate_chars)

    # ---------------------------------------------------------------- 4. usage

    def usage(self, scope: Scope, estimate: int, view_tokens: int, meter: TokenMeter) -> MeterStats:
        """The figure the trigger compares for a view estimated at ``view_tokens``."""
        return choose_usage(
            mode=self.config.token_meter,
            estimated=estimate,
            view_estimate=view_tokens,
            meter=meter,
            budget=scope.usable,
            view_has_images=self.index.image_messages > 0,
        )

    def size_model(self, meter: TokenMeter, estimate: int) -> SizeModel:
        """The real-size model for a view estimated at ``estimate`` (identity on estimates)."""
        if self.config.token_meter != "actual":
            return IDENTITY
        return meter.size_model_for(estimate)

    # ---------------------------------------------------------------- 5. escalation

    def ladder(
        self,
        scope: Scope,
        decisions: Decisions,
        *,
        usage: int,
        target: int,
        limit: int | None = None,
        policy: LadderPolicy | None = None,
    ) -> Generator[Step, int | None, None]:
        """The rungs (then, with a ``limit``, the fit pass) from ``decisions`` to ``target``."""
        return plan_escalation(
            self.index,
            decisions,
            usage=usage,
            target=target,
            policy=policy or self.policy,
            retained=scope.retained,
            protected_extra=scope.protected_extra,
            open_tail=scope.open_tail,
            limit=limit,
            forms=self.forms,
        )

    def thresholds(
        self, scope: Scope, stats: CompactionStats | None, effective: int,
        model: SizeModel = IDENTITY,
    ) -> Thresholds:  # fmt: skip
        """A request's thresholds against ``effective``: the one place its figures are made."""
        return thresholds(self.config, effective, self.notices_reserve(scope, stats), model)

    def notices_reserve(self, scope: Scope, stats: CompactionStats | None) -> int:
        """What the view's notices may take: the longest notice, or the room of those standing
        now if more (an escalation may leave them where they are; ``notice_room``)."""
        return max(scope.notice_cost, 0 if stats is None else stats.notice_room)

    def timing(
        self, scope: Scope, limits: Thresholds, *, used: int, estimate: int, model: SizeModel
    ) -> Timing:
        """Whether (and why, and how deep) a request whose trigger figure is ``used``, with a
        view estimated at ``estimate`` (its notices aside), escalates against ``limits``."""
        moment = moment_of(self.index, scope.usable)
        return escalation_timing(
            self.config,
            moment,
            limits,
            used=used,
            over_limit=estimate > limits.limit,
            to_real=lambda growth: model.to_real(growth) - model.to_real(0),
        )

    # ------------------------------------------- 6. statistics, 7. compose (``self.composer``)

    def compose(
        self,
        scope: Scope,
        decisions: Decisions,
        stats: CompactionStats | None,
        body: RenderResult | None = None,
    ) -> tuple[list[Mapping[str, Any]], int, RenderResult]:
        """The notice-inclusive view for ``decisions``, its estimate and the rendered body."""
        if body is None:
            body = self.render(scope, decisions)
        view, tokens = self.composer.compose(scope, decisions, stats, body)
        return view, tokens, body

    # ---------------------------------------------------------------- the passes in order

    def plan(
        self,
        scope: Scope,
        *,
        decisions: Decisions,
        stats: CompactionStats | None,
        meter: TokenMeter,
        hard_fit: bool = False,
        relax: bool = True,
        decided_under: int | None = None,
        views: bool = True,
    ) -> RequestPlan:
        """Plan one request on our estimate: escalate past the trigger, else render as is.

        ``decisions``/``stats`` are those in force. ``relax`` lets a fit pass give up protection
        when the rungs leave the view over budget (plain and retention paths; not measured).
        ``decided_under`` is the room the decisions in force were made under: when the room
        now disproves it (``_room``), an escalation starts from no decisions. ``views=False``
        (a resume's walk): no view is composed, so no map is made (``_map_maker``).
        """
        config, entry = self.config, decisions
        # 3. render, and the view as it goes out when nothing escalates (readings answer
        # whole views).
        body = self.render(scope, decisions)
        estimate = scope.system_tokens + body.tokens
        view, view_tokens = list[Mapping[str, Any]](), estimate
        if views:  # else a walk's: no view goes out
            view, view_tokens, body = self.compose(scope, decisions, stats, body)
        # 4. usage, then the model that converts real figures into estimate units.
        meter_stats = self.usage(scope, estimate, view_tokens, meter)
        model = self.size_model(meter, view_tokens)
        # 5. escalation: the budget (the notice included) and the target are real figures.
        # A real figure is a provider reading: it counts the tool definitions and the learned
        # overhead the budget held back, so it is compared with the budget plus them.
        limits = self.thresholds(scope, stats, _real_budget(scope.budget, meter_stats), model)
        room, reserved, limit = limits.room, limits.reserved, limits.limit
        timing = self.timing(scope, limits, used=meter_stats.used, estimate=estimate, model=model)
        if hard_fit:
            # Hard fit holds against the estimate as well: the model may be wrong.
            limit = min(limit, scope.budget.effective_budget - reserved)
            target, real_target = limit, model.to_real(max(limit, 0))
        else:
            real_target = timing.real_target
            target = model.to_estimate(real_target)
        step: Step | None = None
        start = decisions
        over = timing.reason == "threshold"
        if timing.reason is None and estimate > limit:
            # Hard fit's limit also holds against the estimate (the model may be wrong).
            timing = replace(timing, reason="over_budget")
        if timing.reason is not None:
            # The last rung that changed something: with nothing new to reduce there is no
            # step, and so no storm of identical escalations.
            usage = estimate
            if not decisions.empty and disproved(decided_under, room):
                # Made under a room the readings since disproved: escalate afresh.
                start = NO_DECISIONS
                usage = scope.system_tokens + self.render(scope, start).tokens
            cap = limit if relax else None
            rules = turn_start_policy(self.policy) if timing.for_turn else self.policy
            steps = self.ladder(scope, start, usage=usage, target=target, limit=cap, policy=rules)
            for rung in steps:
                step = rung
            if step is not None and not leaves_room_for_turn(timing, step.usage):
                # The turn would escalate inside its loop anyway: this edit would only add one.
                step, timing = None, replace(timing, reason=None)
        if step is not None:
            # 6. statistics, 7. compose.
            before = (view_tokens, len(view))  # the view as it would go out, notice included
            previous, decisions = start, step.decisions
            body = self.render(scope, decisions)
            stats = self.composer.statistics(
                scope,
                step,
                previous,
                before=before,
                after=body,
                target=real_target,
                measured=meter_stats.payload_figures,
                timing=timing,
                room=limit + reserved,
                in_force=stats if start is entry else None,
            )
            if views:
                view, view_tokens, body = self.compose(scope, decisions, stats, body)
                stats = stats.as_shown(view_tokens)
        return request_plan(
            scope,
            entry,
            view=view,
            view_tokens=view_tokens,
            step=step,
            stats=stats,
            meter_stats=meter_stats,
            repaired=body.repaired,
            size_model=model,
            covered=meter_stats.view_estimate,
            stuck=over and step is None and meter_stats.source == "actual",
            real_budget=limits.effective,
            crowded=scope.budget.crowded(config.target_usage),
            rebased=step is not None and start is not entry,
        )


def _real_budget(budget: Budget, meter_stats: MeterStats) -> int:
    """The budget in the units the plan compares: a reading's when the trigger uses one."""
    return budget.request_budget if meter_stats.source == "actual" else budget.effective_budget
