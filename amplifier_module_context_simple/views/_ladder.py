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

import itertools
import math
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from ..history._history import HistoryIndex
from ._decisions import Decisions
from ._forms import ShortForms, can_truncate, text_of
from ._protection import LadderPolicy, Protection, newest, protected_positions
from ._turns import mend_turns
from ._working import WorkingPlan

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


class Step:
    """The state after one rung that changed something.

    Its decisions are built when first read: a plain request keeps only an escalation's last
    step, and building decisions copies every position the view leaves out.
    """

    __slots__ = (
        "_decisions",
        "_make",
        "base",
        "groups_removed",
        "level",
        "results_shortened",
        "touched",
        "usage",
    )

    def __init__(
        self,
        level: int,
        decisions: Decisions | Callable[[], Decisions],
        usage: int,
        *,
        results_shortened: int = 0,
        groups_removed: int = 0,
        base: Decisions | None = None,
        touched: frozenset[int] = frozenset(),
    ) -> None:
        self.level = level
        self._decisions, self._make = (
            (decisions, None) if isinstance(decisions, Decisions) else (None, decisions)
        )
        self.usage = usage
        self.results_shortened = results_shortened
        """Protected tool results the fit pass shortened in this escalation."""
        self.groups_removed = groups_removed
        """Removal units (a call group or one message) the fit pass took from protected
        ground."""
        self.base = base
        """The decisions the escalation started from."""
        self.touched = touched
        """Every position where ``decisions`` may differ from ``base`` (``Decisions.added``)."""

    @property
    def decisions(self) -> Decisions:
        if self._decisions is None:
            assert self._make is not None
            self._decisions, self._make = self._make(), None
        return self._decisions


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
    forms: ShortForms | None = None,
) -> Generator[Step, int | None, None]:
    """Yield the decisions after each rung that changed something.

    ``usage`` is the estimated size of the view under ``base`` (system messages included);
    rungs run until it is at or below ``target``. With a ``limit`` (the hard ceiling, in the
    same units) the rungs aim for ``min(target, limit)`` and, if the view is still over the
    limit after the last rung, a fit pass relaxes protection down to the floor. The caller
    decides which step to keep; the measured-request path (no ``limit``: there the provider's
    count decides) counts each one and may ``send`` a corrected target back into the generator.
    ``forms``: the estimates of shortened forms known so far (the planner's cache).
    """
    plan = WorkingPlan(index, base, retained, usage, forms=forms)
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
    # A rung whose changes mending undid changes nothing: it must not become an escalation
    # (its statistics would move the notice and announce a compaction that reduced nothing).
    for rung in RUNGS:
        if plan.usage <= target:
            break
        plan.changed = False
        if rung.action == "truncate":
            _truncate(plan, protected, rung.share, target, policy.truncate_chars)
        elif rung.action == "remove":
            recent = _recent_floor(index, plan, policy.protected_recent * rung.share)
            _remove(plan, protected | recent, target, policy.truncate_chars)
            mend_turns(plan, protected | recent, policy.truncate_chars, open_tail)
        else:
            _extreme(plan, protected, target, policy.truncate_chars)
            mend_turns(plan, protected, policy.truncate_chars, open_tail)
        if plan.changed and plan.reduced():
            level = max(base.level, rung.level)
            step = _step(plan, rung.level, level, escalations)
            # A caller that measures each step for real may send a corrected target back.
            corrected = yield step
            if corrected is not None:
                target = corrected
    if limit is None or plan.usage <= limit:
        return
    shortened, groups = _relax(plan, protection.floor, limit, policy.truncate_chars, open_tail)
    if shortened or groups:
        yield _step(plan, FIT_LEVEL, max(level, FIT_LEVEL), escalations, (shortened, groups))


def _step(
    plan: WorkingPlan, rung: int, level: int, escalations: int, relaxed: tuple[int, int] = (0, 0)
) -> Step:
    touched = plan.touched
    return Step(
        rung,
        plan.later(level, escalations, touched),
        plan.usage,
        results_shortened=relaxed[0],
        groups_removed=relaxed[1],
        base=plan.base,
        touched=touched,
    )


def _relax(
    plan: WorkingPlan, floor: frozenset[int], limit: int, keep_chars: int, open_tail: int | None
) -> tuple[int, int]:
    """The fit pass: shorten protected results oldest first, then remove recent groups.

    Returns how many results it shortened and how many removal units it took.
    """
    index = plan.index
    truncated_before, removed_before = set(plan.truncated), plan.removed.mark()
    for _ in range(MAX_FIT_ROUNDS):
        usage = plan.usage
        _truncate(plan, floor, 1.0, limit, keep_chars)
        _remove(plan, floor, limit, keep_chars)
        mend_turns(plan, floor, keep_chars, open_tail)
        # Mending may bring a unit back; another round can shorten or remove something else.
        if plan.usage <= limit or plan.usage >= usage:
            break
    shortened = set(plan.truncated) - truncated_before
    removed = plan.removed.since(removed_before)
    plan.relaxed.update(shortened, removed)
    groups = sum(1 for p in removed if p not in index.pairing.owner_of)
    return len(shortened - removed), groups


def _recent_floor(index: HistoryIndex, plan: WorkingPlan, share: float) -> frozenset[int]:
    """The newest ``share`` of the positions still shown (system messages aside)."""
    # Display-only rows are never sent (nor ever removed): not part of the share either.
    systems = set(index.system_positions).union(index.display_only_positions)
    if len(plan.removed) > plan.size // 2:
        # Mostly left out: the few shown positions are listed (never the removed ones).
        shown = [p for p in plan.shown_list() if p not in systems]
        count = math.ceil(len(shown) * share)
        return frozenset(shown[len(shown) - count :])
    # Mostly shown: counted, then picked from the end.
    size, removed = plan.size, plan.removed.frozen()  # read in C below
    in_range = not removed or max(removed) < size
    left_out = len(removed) if in_range else sum(p < size for p in removed)
    count = math.ceil((size - left_out - sum(p not in removed for p in systems)) * share)
    recent: list[int] = []
    position = size - 1
    while len(recent) < count:
        if position not in removed and position not in systems:
            recent.append(position)
        position -= 1
    return frozenset(recent)


def _truncate(
    plan: WorkingPlan, protected: frozenset[int], share: float, target: int, keep_chars: int
) -> None:
    index = plan.index
    # The tool results still shown and not protected, oldest first, read from whichever list
    # is shorter: the tool results (what is left out is skipped in C) or what is shown.
    orphans, results = index.pairing.orphans, index.tool_result_positions
    shown: Iterable[int]
    if len(plan.removed) > len(results):
        shown = plan.shown_results()
    else:
        shown = itertools.filterfalse(plan.removed.membership(), results)
    candidates = [
        p for p in shown if p not in protected and p not in plan.stubbed and p not in orphans
    ]
    limit = math.ceil(len(candidates) * share)
    for position in candidates[:limit]:
        if plan.usage <= target:
            return
        fact = index.facts[position]
        if position in plan.truncated or not can_truncate(fact.sent, keep_chars):
            continue
        short = plan.forms.truncated_tokens(position, fact.tokens, keep_chars)
        if short >= fact.tokens:
            continue
        plan.truncate(position, fact.tokens)
        plan.usage -= fact.tokens - short
        plan.changed = True


def _units(index: HistoryIndex, plan: WorkingPlan) -> Iterator[tuple[int, ...]]:
    """Removal units oldest first: a whole tool-call group, or a single message.

    The walk reads ``removed`` as it goes, and finds the heads it would have found at its
    start: what ``_remove`` takes out meanwhile is the unit just yielded, whose results are
    owned positions (never heads) anyway.
    """
    pairing = index.pairing
    systems = set(index.system_positions).union(index.display_only_positions)
    # Only what is shown is walked; of it, orphans and display-only rows are never rendered
    # (removing one saves nothing) and owned results go with their call.
    for position in plan.shown():
        if position in systems or position in pairing.owner_of or position in pairing.orphans:
            continue
        if index.facts[position].calls:
            yield (position, *pairing.results_of.get(position, ()))
        else:
            yield (position,)


def _remove(plan: WorkingPlan, protected: frozenset[int], target: int, keep_chars: int) -> None:
    index = plan.index
    for unit in _units(index, plan):
        if plan.usage <= target:
            return
        head = unit[0]
        # The call still being executed is in the floor; an older interrupted call is history
        # like any other (its placeholder goes with it).
        if head == plan.pinned or plan.locked(head) or not protected.isdisjoint(unit):
            continue
        saved = 0
        for p in unit:  # weighed as shown, before any of it is taken out
            saved += plan.rendered_tokens(p, keep_chars)
        plan.usage -= saved
        for p in unit:
            plan.take_out(p)
        plan.changed = True


def _extreme(plan: WorkingPlan, protected: frozenset[int], target: int, keep_chars: int) -> None:
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
    facts = index.facts
    first_user = next(
        (
            i
            for i in plan.shown()
            if facts[i].role == "user" and not facts[i].human and not facts[i].tool_result
        ),
        None,
    )
    if first_user is None or first_user in protected or first_user in plan.stubbed:
        return
    fact = index.facts[first_user]
    if len(text_of(fact.sent)) < STUB_MIN_CHARS:
        return
    short = plan.forms.stubbed_tokens(first_user)
    if short < fact.tokens:
        plan.stub(first_user, len(text_of(fact.sent)))
        plan.usage -= fact.tokens - short
        plan.changed = True
