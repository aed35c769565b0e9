"""The compaction ladder: eight rungs as data, and the pure planning of one escalation.

Planning never touches history or manager state. It starts from the decisions in force and
yields, rung by rung, the decisions that would bring the view's estimated size down, stopping
as soon as the target is met. Protection is computed once per escalation; whole tool-call
groups are the unit of removal, so a call never loses its results or vice versa.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ._decisions import Decisions
from ._history import HistoryIndex
from ._render import can_truncate, stubbed, text_of, truncated

STUB_MIN_CHARS = 600
"""A non-prompt user message shorter than this is not worth stubbing."""


@dataclass(frozen=True, slots=True)
class Rung:
    level: int
    action: Literal["truncate", "remove", "extreme"]
    share: float
    """truncate: the cumulative share of the oldest tool results it may shorten;
    remove: the factor applied to ``protected_recent``."""


RUNGS: tuple[Rung, ...] = (
    Rung(1, "truncate", 0.25),
    Rung(2, "truncate", 0.50),
    Rung(3, "remove", 1.0),
    Rung(4, "truncate", 0.75),
    Rung(5, "remove", 0.6),
    Rung(6, "truncate", 1.0),
    Rung(7, "remove", 0.3),
    Rung(8, "extreme", 0.0),
)


@dataclass(frozen=True, slots=True)
class LadderPolicy:
    protected_recent: float
    protected_tool_results: int
    truncate_chars: int


@dataclass(frozen=True, slots=True)
class Step:
    """The state after one rung that changed something."""

    level: int
    decisions: Decisions
    usage: int
    target_met: bool


class _Plan:
    """Mutable working copy of the decisions during one escalation."""

    def __init__(
        self, index: HistoryIndex, base: Decisions, retained: frozenset[int], usage: int
    ) -> None:
        self.index = index
        self.removed = set(base.removed) - retained
        self.truncated = {k: v for k, v in base.truncated.items() if k not in retained}
        self.stubbed = {k: v for k, v in base.stubbed.items() if k not in retained}
        self.usage = usage
        self.changed = False
        self.short: dict[int, int] = {}
        """Estimated tokens of a shortened form, remembered from when it was planned."""

    def rendered_tokens(self, position: int, keep_chars: int) -> int:
        fact = self.index.facts[position]
        if position in self.truncated:
            if position not in self.short:
                self.short[position] = self.index.estimate(
                    truncated(fact.sent, self.truncated[position], keep_chars)
                )
            return self.short[position]
        if position in self.stubbed:
            return self.index.estimate(stubbed(fact.sent))
        return fact.tokens

    def decisions(self, level: int, escalations: int) -> Decisions:
        return Decisions(
            removed=frozenset(self.removed),
            truncated=MappingProxyType(dict(self.truncated)),
            stubbed=MappingProxyType(dict(self.stubbed)),
            level=level,
            escalations=escalations,
        )


def plan_escalation(
    index: HistoryIndex,
    base: Decisions,
    *,
    usage: int,
    target: int,
    policy: LadderPolicy,
    retained: frozenset[int] = frozenset(),
    protected_extra: frozenset[int] = frozenset(),
    open_tail: int | None = None,
) -> Generator[Step, int | None, None]:
    """Yield the decisions after each rung that changed something.

    ``usage`` is the estimated size of the view under ``base`` (system messages included);
    rungs run until it is at or below ``target``. The caller decides which step to keep; the
    measured-request path counts each one with the provider and may ``send`` a corrected
    target (in estimate units) back into the generator.
    """
    plan = _Plan(index, base, retained, usage)
    protected = _protected(index, plan, policy, retained | protected_extra, open_tail)
    escalations = base.escalations + 1
    for rung in RUNGS:
        if plan.usage <= target:
            return
        plan.changed = False
        if rung.action == "truncate":
            _truncate(plan, protected, rung.share, target, policy.truncate_chars)
        elif rung.action == "remove":
            recent = _recent_floor(index, plan, policy.protected_recent * rung.share)
            _remove(plan, protected | recent, target, policy.truncate_chars, open_tail)
        else:
            _extreme(plan, protected, target, policy.truncate_chars)
        if plan.changed:
            step = Step(
                rung.level,
                plan.decisions(max(base.level, rung.level), escalations),
                plan.usage,
                plan.usage <= target,
            )
            # A caller that measures each step for real may send a corrected target back.
            corrected = yield step
            if corrected is not None:
                target = corrected


def _protected(
    index: HistoryIndex,
    plan: _Plan,
    policy: LadderPolicy,
    extra: frozenset[int],
    open_tail: int | None,
) -> frozenset[int]:
    """Positions no rung may touch (the share-dependent recent window is added per rung)."""
    facts = index.facts
    keep: set[int] = set(extra)
    humans = [i for i, f in enumerate(facts) if f.human]
    if humans:
        keep.update((humans[0], humans[-1]))
    keep.update(i for i, f in enumerate(facts) if f.loaded_tools or f.role == "system")
    orphans = index.pairing.orphans
    results = [
        i
        for i, f in enumerate(facts)
        if f.tool_result and i not in plan.removed and i not in orphans
    ]
    recent_results = (
        results[len(results) - policy.protected_tool_results :]
        if (policy.protected_tool_results)
        else []
    )
    keep.update(recent_results)
    if open_tail is not None:
        keep.add(open_tail)
    # The latest assistant turn carries the thinking the provider checks; it stays whole.
    latest = next((i for i in range(len(facts) - 1, -1, -1) if facts[i].role == "assistant"), None)
    if latest is not None:
        keep.add(latest)
    return frozenset(keep)


def _recent_floor(index: HistoryIndex, plan: _Plan, share: float) -> frozenset[int]:
    visible = [i for i, f in enumerate(index.facts) if f.role != "system" and i not in plan.removed]
    count = math.ceil(len(visible) * share)
    return frozenset(visible[len(visible) - count :]) if count else frozenset()


def _truncate(
    plan: _Plan, protected: frozenset[int], share: float, target: int, keep_chars: int
) -> None:
    index = plan.index
    candidates = [
        i
        for i, f in enumerate(index.facts)
        if f.tool_result
        and i not in plan.removed
        and i not in protected
        and i not in plan.stubbed
        and i not in index.pairing.orphans
    ]
    limit = math.ceil(len(candidates) * share)
    for position in candidates[:limit]:
        if plan.usage <= target:
            return
        fact = index.facts[position]
        if position in plan.truncated or not can_truncate(fact.sent, keep_chars):
            continue
        short = index.estimate(truncated(fact.sent, fact.tokens, keep_chars))
        if short >= fact.tokens:
            continue
        plan.truncated[position] = fact.tokens
        plan.short[position] = short
        plan.usage -= fact.tokens - short
        plan.changed = True


def _units(index: HistoryIndex, plan: _Plan) -> Iterator[tuple[int, ...]]:
    """Removal units oldest first: a whole tool-call group, or a single message."""
    for position, fact in enumerate(index.facts):
        if (
            fact.role == "system"
            or position in plan.removed
            or position in index.pairing.owner_of
            or position in index.pairing.orphans  # never rendered: removing it saves nothing
        ):
            continue
        if fact.calls:
            yield (position, *index.pairing.results_of.get(position, ()))
        else:
            yield (position,)


def _remove(
    plan: _Plan,
    protected: frozenset[int],
    target: int,
    keep_chars: int,
    open_tail: int | None,
) -> None:
    index = plan.index
    for unit in _units(index, plan):
        if plan.usage <= target:
            return
        head = unit[0]
        if any(p in protected for p in unit):
            continue
        if index.facts[head].calls and (head == open_tail or index.pairing.missing(head)):
            continue  # an unanswered call is never removed
        plan.usage -= sum(plan.rendered_tokens(p, keep_chars) for p in unit)
        for p in unit:
            plan.removed.add(p)
            plan.truncated.pop(p, None)
            plan.stubbed.pop(p, None)
        plan.changed = True


def _extreme(plan: _Plan, protected: frozenset[int], target: int, keep_chars: int) -> None:
    index = plan.index
    # Stubs left by earlier escalations go first: they carry almost nothing any more.
    for position in sorted(plan.stubbed):
        if plan.usage <= target:
            return
        if position in protected:
            continue
        plan.usage -= plan.rendered_tokens(position, keep_chars)
        del plan.stubbed[position]
        plan.removed.add(position)
        plan.changed = True
    first_user = next(
        (
            i
            for i, f in enumerate(index.facts)
            if f.role == "user" and not f.human and not f.tool_result and i not in plan.removed
        ),
        None,
    )
    if first_user is None or first_user in protected or first_user in plan.stubbed:
        return
    fact = index.facts[first_user]
    if len(text_of(fact.sent)) < STUB_MIN_CHARS:
        return
    short = index.estimate(stubbed(fact.sent))
    if short < fact.tokens:
        plan.stubbed[first_user] = len(text_of(fact.sent))
        plan.usage -= fact.tokens - short
        plan.changed = True
