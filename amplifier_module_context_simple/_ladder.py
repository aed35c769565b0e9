"""The compaction ladder: eight rungs as data, and the pure planning of one escalation.

Planning never touches history or manager state. It starts from the decisions in force and
yields, rung by rung, the decisions that would bring the view's estimated size down, stopping
as soon as the target is met. Protection is computed once per escalation; whole tool-call
groups are the unit of removal, so a call never loses its results or vice versa.

Protection is a preference below the budget, not above it: when the eight rungs leave the view
over a hard ``limit``, a fit pass relaxes it (shortening protected tool results, then removing
groups from the protected recent window) until the view fits or only the floor is left. The
floor is what a provider needs to read the conversation at all: system messages, the first and
latest human prompt, retained envelopes, an unanswered call with its tail, the latest assistant
message when it carries thinking or calls, and the opening thinking round of the active turn.
"""

from __future__ import annotations

__all__ = [
    "FIT_LEVEL",
    "RUNGS",
    "STUB_MIN_CHARS",
    "LadderPolicy",
    "Protection",
    "Rung",
    "Step",
    "plan_escalation",
]

import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ._decisions import Decisions
from ._history import HistoryIndex
from ._protection import LadderPolicy, Protection, is_reminder, newest, protected_positions
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


MAX_FIT_ROUNDS = 4
"""Fit-pass rounds at most: each one after the first only follows up what mending restored."""

FIT_LEVEL = RUNGS[-1].level
"""The level a fit pass reports: it only runs once every rung has been tried."""


@dataclass(frozen=True, slots=True)
class Step:
    """The state after one rung that changed something."""

    level: int
    decisions: Decisions
    usage: int
    target_met: bool
    results_shortened: int = 0
    """Protected tool results the fit pass shortened in this escalation."""
    groups_removed: int = 0
    """Removal units (a call group or one message) the fit pass took from protected ground."""


class _Plan:
    """Mutable working copy of the decisions during one escalation."""

    def __init__(
        self, index: HistoryIndex, base: Decisions, retained: frozenset[int], usage: int
    ) -> None:
        self.index = index
        self.removed = set(base.removed) - retained
        self.truncated = {k: v for k, v in base.truncated.items() if k not in retained}
        self.stubbed = {k: v for k, v in base.stubbed.items() if k not in retained}
        self.relaxed = set(base.relaxed) - retained
        self.usage = usage
        self.changed = False
        self.taken_out: dict[int, tuple[int | None, int | None]] = {}
        """How a position left out during this escalation was shown before (truncated, stubbed)."""
        self.restored: set[int] = set()
        """Positions mending had to bring back: removing them again would only undo that."""
        self.pinned: int | None = None
        """A position no rung may remove (it may still be shortened)."""
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

    def take_out(self, position: int) -> None:
        """Leave ``position`` out, remembering how it was shown in case it has to come back."""
        self.removed.add(position)
        shown = (self.truncated.pop(position, None), self.stubbed.pop(position, None))
        if shown != (None, None):
            self.taken_out[position] = shown

    def put_back(self, position: int) -> None:
        """Show ``position`` again, shortened or stubbed as it was before it was left out."""
        self.removed.discard(position)
        self.relaxed.discard(position)
        self.restored.add(position)
        truncated, stubbed = self.taken_out.pop(position, (None, None))
        if truncated is not None:
            self.truncated[position] = truncated
        if stubbed is not None:
            self.stubbed[position] = stubbed

    def decisions(self, level: int, escalations: int) -> Decisions:
        return Decisions(
            removed=frozenset(self.removed),
            truncated=MappingProxyType(dict(self.truncated)),
            stubbed=MappingProxyType(dict(self.stubbed)),
            level=level,
            escalations=escalations,
            relaxed=frozenset(self.relaxed),
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
    limit: int | None = None,
) -> Generator[Step, int | None, None]:
    """Yield the decisions after each rung that changed something.

    ``usage`` is the estimated size of the view under ``base`` (system messages included);
    rungs run until it is at or below ``target``. With a ``limit`` (the hard ceiling, in the
    same units) the rungs aim for ``min(target, limit)`` and, if the view is still over the
    limit after the last rung, a fit pass relaxes protection down to the floor. The caller
    decides which step to keep; the measured-request path (no ``limit``: there the provider's
    count decides) counts each one and may ``send`` a corrected target back into the generator.
    """
    plan = _Plan(index, base, retained, usage)
    plan.pinned = newest(index)
    protection = protected_positions(index, policy, retained | protected_extra, open_tail)
    protected = protection.keep
    # What an earlier fit pass took is only "relaxed" while it would still be protected; once
    # newer messages push it out, it is ordinary compaction (and the notice stops saying so).
    plan.relaxed &= protected
    escalations = base.escalations + 1
    level = base.level
    if limit is not None:
        target = min(target, limit)
    for rung in RUNGS:
        if plan.usage <= target:
            break
        plan.changed = False
        if rung.action == "truncate":
            _truncate(plan, protected, rung.share, target, policy.truncate_chars)
        elif rung.action == "remove":
            recent = _recent_floor(index, plan, policy.protected_recent * rung.share)
            _remove(plan, protected | recent, target, policy.truncate_chars, open_tail)
            _mend_turns(plan, protected | recent, policy.truncate_chars, open_tail)
        else:
            _extreme(plan, protected, target, policy.truncate_chars)
            _mend_turns(plan, protected, policy.truncate_chars, open_tail)
        if plan.changed:
            level = max(base.level, rung.level)
            step = Step(rung.level, plan.decisions(level, escalations), plan.usage,
                        plan.usage <= target)  # fmt: skip
            # A caller that measures each step for real may send a corrected target back.
            corrected = yield step
            if corrected is not None:
                target = corrected
    if limit is None or plan.usage <= limit:
        return
    shortened, groups = _relax(plan, protection.floor, limit, policy.truncate_chars, open_tail)
    if shortened or groups:
        yield Step(
            FIT_LEVEL,
            plan.decisions(max(level, FIT_LEVEL), escalations),
            plan.usage,
            plan.usage <= target,
            results_shortened=shortened,
            groups_removed=groups,
        )


def _relax(
    plan: _Plan, floor: frozenset[int], limit: int, keep_chars: int, open_tail: int | None
) -> tuple[int, int]:
    """The fit pass: shorten protected results oldest first, then remove recent groups.

    Returns how many results it shortened and how many removal units it took.
    """
    index = plan.index
    truncated_before, removed_before = set(plan.truncated), set(plan.removed)
    for _ in range(MAX_FIT_ROUNDS):
        usage = plan.usage
        _truncate(plan, floor, 1.0, limit, keep_chars)
        _remove(plan, floor, limit, keep_chars, open_tail)
        _mend_turns(plan, floor, keep_chars, open_tail)
        # Mending may bring a unit back; another round can shorten or remove something else.
        if plan.usage <= limit or plan.usage >= usage:
            break
    shortened = set(plan.truncated) - truncated_before
    removed = plan.removed - removed_before
    plan.relaxed.update(shortened, removed)
    groups = sum(1 for p in removed if p not in index.pairing.owner_of)
    return len(shortened - removed), groups


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
        if head == plan.pinned or head in plan.restored or any(p in protected for p in unit):
            continue
        if index.facts[head].calls and (head == open_tail or index.pairing.missing(head)):
            continue  # an unanswered call is never removed
        plan.usage -= sum(plan.rendered_tokens(p, keep_chars) for p in unit)
        for p in unit:
            plan.take_out(p)
        plan.changed = True


def _mend_turns(
    plan: _Plan, protected: frozenset[int], keep_chars: int, open_tail: int | None
) -> None:
    """Make sure no human prompt lands inside a tool round the history had closed.

    Consecutive user-role turns merge at the provider, so a prompt that now follows a tool
    result (with nothing but hook reminders in between) where the history had something else
    before it would be read as part of that round. The prompt is left out too when nothing
    protects it; otherwise what was removed right before it comes back.
    """
    index = plan.index
    facts, pairing = index.facts, index.pairing
    in_round = False  # the last message rendered ends a tool round
    gap = False  # something between that round and here is no longer shown
    for position, fact in enumerate(facts):
        if fact.role == "system" or position in pairing.orphans:
            continue
        if position in plan.removed:
            gap = gap or in_round
            continue
        if position in pairing.owner_of:
            continue  # rendered together with its call
        if fact.human and in_round and gap:
            if position not in protected and position != plan.pinned:
                plan.usage -= plan.rendered_tokens(position, keep_chars)
                plan.take_out(position)
                plan.changed = True
                continue
            _restore_before(plan, position, keep_chars)
            # Restored, the prompt follows what it followed in the history.
            in_round = gap = False
            continue
        if fact.calls:
            kept = [r for r in pairing.results_of.get(position, ()) if r not in plan.removed]
            in_round = bool(kept) or (position != open_tail and bool(pairing.missing(position)))
            gap = False
        elif fact.tool_result:
            in_round, gap = True, False  # a result whose call is gone is never rendered
        elif not is_reminder(fact):
            in_round = gap = False  # hook reminders merge into the round; anything else ends it


def _restore_before(plan: _Plan, position: int, keep_chars: int) -> None:
    """Show again what sits right before ``position`` in the history, unit by unit.

    A restored prompt (or reminder) would itself sit inside the round, so the walk goes on back
    until it restores something that ends the round (or finds it already shown).
    """
    index = plan.index
    facts = index.facts
    while True:
        # Hook reminders still shown merge into the prompt's turn: look past them.
        previous = next(
            (
                p
                for p in range(position - 1, -1, -1)
                if facts[p].role != "system"
                and p not in index.pairing.orphans
                and not (p not in plan.removed and is_reminder(facts[p]))
            ),
            None,
        )
        if previous is None or previous not in plan.removed:
            return
        head = index.pairing.owner_of.get(previous, previous)
        for p in (head, *index.pairing.results_of.get(head, ())):
            if p in plan.removed:
                plan.put_back(p)
                plan.usage += plan.rendered_tokens(p, keep_chars)
                plan.changed = True
        if not (facts[previous].human or is_reminder(facts[previous])):
            return  # restored a message that ends the round: the prompt no longer lands in it
        position = previous


def _extreme(plan: _Plan, protected: frozenset[int], target: int, keep_chars: int) -> None:
    index = plan.index
    # Stubs left by earlier escalations go first: they carry almost nothing any more.
    for position in sorted(plan.stubbed):
        if plan.usage <= target:
            return
        if position in protected or position == plan.pinned:
            continue
        plan.usage -= plan.rendered_tokens(position, keep_chars)
        plan.take_out(position)
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
