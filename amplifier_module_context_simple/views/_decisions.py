"""Sticky compaction decisions: what the view leaves out or shortens, by history position.

Decisions are immutable values. An escalation builds a new :class:`Decisions` from the old one,
so a snapshot is just a reference and a rollback is an assignment. The same history rendered
with the same decisions gives a byte-identical view, which is what keeps a provider's prompt
cache warm between escalations.
"""

from __future__ import annotations

__all__ = [
    "NO_DECISIONS",
    "CompactionStats",
    "Decisions",
    "EarlierNotice",
    "LeftOutMap",
    "NoticeFigures",
    "Reductions",
]

import itertools
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any


def _frozen_map() -> MappingProxyType[int, int]:
    return MappingProxyType({})


Reductions = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""Positions (removed, truncated, stubbed), each ascending."""


class _Shown:
    """The positions below ``stop`` that some decisions do not leave out, ascending."""

    __slots__ = ("positions", "stop")

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.stop = 0


@dataclass(frozen=True, slots=True)
class Decisions:
    """The reductions in force, keyed by position in the canonical history."""

    removed: frozenset[int] = frozenset()
    truncated: MappingProxyType[int, int] = field(default_factory=_frozen_map)
    """Position -> estimated tokens of the original (the N shown in the marker)."""
    stubbed: MappingProxyType[int, int] = field(default_factory=_frozen_map)
    """Position -> length in characters of the original content."""
    level: int = 0
    """The deepest ladder rung any escalation so far reached (0: never compacted): the
    decisions in force carry every earlier escalation's reductions, so a later, shallower one
    does not lower it."""
    escalations: int = 0
    relaxed: frozenset[int] = frozenset()
    """Positions the fit pass shortened or removed from protected ground."""
    _shown: _Shown = field(default_factory=_Shown, init=False, repr=False, compare=False)
    """A cache of ``shown``: a pure function of ``removed``, so it never goes stale."""

    @property
    def empty(self) -> bool:
        return not (self.removed or self.truncated or self.stubbed)

    def shown(self, start: int, stop: int) -> Sequence[int]:
        """The positions ``start <= p < stop`` these decisions do not leave out, ascending.

        A compacted history is mostly left out, and a render or an escalation walks only what
        is shown: the positions are listed once per decisions (and extended as the history
        grows), not found again among every removed one on each walk.
        """
        if not self.removed:
            return range(start, stop)
        cache = self._shown
        if cache.stop < stop:
            cache.positions.extend(
                itertools.filterfalse(self.removed.__contains__, range(cache.stop, stop))
            )
            cache.stop = stop
        positions = cache.positions
        low = bisect_left(positions, start) if start > 0 else 0
        high = bisect_left(positions, stop) if stop < cache.stop else len(positions)
        return positions[low:high]

    def know_shown(self, stop: int, positions: list[int]) -> None:
        """Take ``positions`` as ``shown(0, stop)``: the escalation that made these decisions
        has just walked them (they must be exactly those, ascending)."""
        if self.removed and self._shown.stop == 0:
            self._shown.positions, self._shown.stop = positions, stop

    def without(self, positions: frozenset[int]) -> Decisions:
        """The same decisions with ``positions`` shown whole (request-scoped retention)."""
        return Decisions(
            removed=self.removed - positions,
            truncated=MappingProxyType(
                {k: v for k, v in self.truncated.items() if k not in positions}
            ),
            stubbed=MappingProxyType({k: v for k, v in self.stubbed.items() if k not in positions}),
            level=self.level,
            escalations=self.escalations,
            relaxed=self.relaxed - positions,
        )

    def before(self, position: int) -> Decisions:
        """The decisions about the messages before ``position`` only.

        When a history is rewritten from ``position`` on (a subclass re-read a store that
        changed mid-history), what was decided about the old messages there must not be
        applied to whatever sits at those positions now. The unchanged part keeps its
        decisions: to them, the new messages are what ordinary growth appends, and an
        escalation decides about them afresh.
        """
        if all(p < position for p in (*self.removed, *self.truncated, *self.stubbed)):
            return self
        return Decisions(
            removed=frozenset(p for p in self.removed if p < position),
            truncated=MappingProxyType({k: v for k, v in self.truncated.items() if k < position}),
            stubbed=MappingProxyType({k: v for k, v in self.stubbed.items() if k < position}),
            level=self.level,
            escalations=self.escalations,
            relaxed=frozenset(p for p in self.relaxed if p < position),
        )

    def added(self, previous: Decisions, among: frozenset[int] | None = None) -> Reductions:
        """What these decisions leave out, shorten and stub that ``previous`` did not.

        ``among``: every position where the two may differ, when the escalation that made
        these from ``previous`` knows them: of the positions left out (thousands, once a long
        history is compacted) only those are compared.
        """
        removed = self.removed if among is None else among.intersection(self.removed)
        return (
            tuple(sorted(removed.difference(previous.removed))),
            tuple(sorted(set(self.truncated).difference(previous.truncated))),
            tuple(sorted(set(self.stubbed).difference(previous.stubbed))),
        )

    @property
    def protection_relaxed(self) -> bool:
        """Whether a fit pass shortened or removed protected content that is still out."""
        return bool(self.relaxed)


NO_DECISIONS = Decisions()


@dataclass(frozen=True, slots=True)
class NoticeFigures:
    """The numbers a notice states (every one of them comes from sticky state)."""

    history_messages: int
    removed: int
    truncated: int
    stubbed: int
    relaxed: bool
    left_out_map: tuple[str, ...] = ()
    """The map's lines (``_left_out_map``): its cost is bounded apart (``map_bound``)."""

    @classmethod
    def largest(cls, history_messages: int) -> NoticeFigures:
        """Figures at least as long as any notice for a history this size can state (every
        count stated), without a map."""
        wide = 10 ** len(str(history_messages + 1000)) - 1
        return cls(wide, wide, wide, wide, relaxed=True)


class LeftOutMap:
    """An escalation's map of what its view left out (``_left_out_map``): ordered at the
    escalation, made the first time a view shows it (``_map_maker``).

    The order fixes all that decides anything: the room the map may take (``bound``, counted
    whole in the notice's figure) and what it is made from. So a resume's walk decides the
    same without making any map its view does not show. Once made, the lines are kept and
    the recipe let go (notices standing one beside the other would keep old decisions alive).
    """

    __slots__ = ("_lines", "_recipe", "bound", "length")

    def __init__(
        self,
        decisions: Decisions,
        figures: NoticeFigures,
        shown: tuple[EarlierNotice, ...],
        *,
        bound: int,
        length: int,
    ) -> None:
        self.bound = bound
        """The tokens the map may take; the notice is counted with all of them."""
        self.length = length  # the history's length at the escalation: made as of then
        recipe = (decisions, figures, shown)
        self._recipe: tuple[Decisions, NoticeFigures, tuple[EarlierNotice, ...]] | None = recipe
        self._lines: tuple[str, ...] | None = None

    @property
    def made(self) -> bool:
        return self._lines is not None

    @property
    def lines(self) -> tuple[str, ...]:
        """The map's lines, the heading first (empty: nothing fitted)."""
        if self._lines is None:
            raise RuntimeError("the map of what was left out is read before it was made")
        return self._lines

    def recipe(self) -> tuple[Decisions, NoticeFigures, tuple[EarlierNotice, ...]]:
        """What the map is made from: the escalation's decisions, what its notice states
        besides the map, and the earlier notices standing beside it (their names are not
        listed again)."""
        if self._recipe is None:
            raise RuntimeError("the map of what was left out was made already")
        return self._recipe

    def keep(self, lines: tuple[str, ...]) -> None:
        """The map as made from ``recipe``."""
        self._lines, self._recipe = lines, None


@dataclass(frozen=True, slots=True)
class EarlierNotice:
    """An earlier escalation's notice that still stands: where, what it states, and the
    tokens it is counted at (its map at the whole room it was given: ``LeftOutMap``)."""

    position: int
    """The history position it stands before (that escalation's ``notice_at``)."""
    figures: NoticeFigures
    """What it states besides its map."""
    left_out_map: LeftOutMap | None
    tokens: int


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """Figures of the latest escalation; the ``context:compaction`` payload is built from it."""

    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    messages_removed: int
    messages_truncated: int
    user_messages_stubbed: int
    system_messages_preserved: int
    strategy_level: int
    budget: int
    target_tokens: int
    protected_recent: float
    protected_tool_results: int
    history_messages: int = 0
    removed_positions: tuple[int, ...] = ()
    truncated_positions: tuple[int, ...] = ()
    stubbed_positions: tuple[int, ...] = ()
    results_shortened: int = 0
    groups_removed: int = 0
    measured_tokens: int | None = None
    """The real-size figure the actual-mode trigger saw (None when nothing was measured)."""
    overhead_tokens: int | None = None
    """Modelled tokens of every request that are outside the context (tool definitions...)."""
    reason: str | None = None
    """Why it escalated (``_timing.ESCALATION_REASONS``)."""
    at_turn_start: bool = False
    """It came at a turn's first request (else inside a tool loop, or after a reminder)."""
    thinking_blocks_after_edit: int = 0
    """Thinking blocks the view shows after the first position it changed: what a model whose
    thinking is bound to its prompt loses with this edit."""
    notice_tokens: int = 0
    """Of ``after_tokens``, the compaction notices' (the view counts them; not in the
    payload)."""
    notice_room: int = 0
    """The tokens the view's notices are counted at wherever a figure decides something (the
    limit's reserve, what may stand): each map at the whole room its escalation gave it, so
    nothing decided depends on a map's lines (not in the payload)."""
    left_out_map: LeftOutMap | None = None
    """The notice's map of what the view no longer shows (``_left_out_map``), ordered at
    this escalation and made when a view first shows it; kept until the next (not in the
    payload)."""
    notice_at: int | None = None
    """The history position the in-place notice stands before, decided at this escalation
    from the history as it was then (``_compose``; not in the payload). ``None``: decided
    per request (a history rewritten since, ``rewritten``)."""
    earlier_notices: tuple[EarlierNotice, ...] = ()
    """Notices of earlier escalations that still stand, byte for byte, where they stood:
    this escalation changed nothing before them (``_compose``; not in the payload)."""
    restated: bool = True
    """This escalation's own notice is shown. ``False``: only ``earlier_notices`` stand (the
    view had no room for one more; a shortened result says so at its start)."""

    @classmethod
    def of_escalation(
        cls,
        decisions: Decisions,
        previous: Decisions,
        *,
        level: int,
        before: tuple[int, int],
        after: tuple[int, int],
        systems: int,
        budget: int,
        target: int,
        protected_recent: float,
        protected_tool_results: int,
        history_messages: int,
        relaxed: tuple[int, int] = (0, 0),
        measured_tokens: int | None = None,
        overhead_tokens: int | None = None,
        reason: str | None = None,
        at_turn_start: bool = False,
        thinking_blocks_after_edit: int = 0,
        added: Reductions | None = None,
    ) -> CompactionStats:
        """Figures of one escalation: (tokens, messages) before and after, and what it added
        (``added``: ``decisions.added(previous)``, when the caller has it already)."""
        removed, truncated, stubbed = decisions.added(previous) if added is None else added
        return cls(
            before_tokens=before[0],
            after_tokens=after[0],
            before_messages=before[1],
            after_messages=after[1],
            messages_removed=len(removed),
            messages_truncated=len(truncated),
            user_messages_stubbed=len(stubbed),
            system_messages_preserved=systems,
            strategy_level=level,
            budget=budget,
            target_tokens=target,
            protected_recent=protected_recent,
            protected_tool_results=protected_tool_results,
            history_messages=history_messages,
            removed_positions=removed,
            truncated_positions=truncated,
            stubbed_positions=stubbed,
            results_shortened=relaxed[0],
            groups_removed=relaxed[1],
            measured_tokens=measured_tokens,
            overhead_tokens=overhead_tokens,
            reason=reason,
            at_turn_start=at_turn_start,
            thinking_blocks_after_edit=thinking_blocks_after_edit,
        )

    def with_notice(self, tokens: int, messages: int = 1) -> CompactionStats:
        """These figures with the view's notices (``messages`` of them, counted at ``tokens``
        in all: ``notice_room``) counted in."""
        return replace(
            self,
            after_tokens=self.after_tokens + tokens,
            after_messages=self.after_messages + messages,
            notice_tokens=tokens,
            notice_room=tokens,
        )

    def as_shown(self, view_tokens: int) -> CompactionStats:
        """These figures with the view after as it goes out (``view_tokens``, its notices
        made): the notices' own tokens, not the room they were counted at."""
        body = self.after_tokens - self.notice_tokens
        return replace(self, after_tokens=view_tokens, notice_tokens=view_tokens - body)

    def rewritten(self) -> CompactionStats:
        """These figures over a history rewritten in the middle: where the notice stands is
        decided per request again (the rewrite may have moved the turns it was decided by)."""
        if self.notice_at is None and not self.earlier_notices:
            return self
        return replace(self, notice_at=None, earlier_notices=())

    def payload(self) -> dict[str, Any]:
        return {
            "before_tokens": self.before_tokens,
            "after_tokens": self.after_tokens,
            "before_messages": self.before_messages,
            "after_messages": self.after_messages,
            "messages_removed": self.messages_removed,
            "messages_truncated": self.messages_truncated,
            "user_messages_stubbed": self.user_messages_stubbed,
            "system_messages_preserved": self.system_messages_preserved,
            "strategy_level": self.strategy_level,
            "budget": self.budget,
            "target_tokens": self.target_tokens,
            "protected_recent": self.protected_recent,
            "protected_tool_results": self.protected_tool_results,
            "history_messages": self.history_messages,
            "removed_positions": list(self.removed_positions),
            "truncated_positions": list(self.truncated_positions),
            "stubbed_positions": list(self.stubbed_positions),
            "protection_relaxed": {
                "tool_results_shortened": self.results_shortened,
                "groups_removed": self.groups_removed,
            },
            "measured_tokens": self.measured_tokens,
            "overhead_tokens": self.overhead_tokens,
            "reason": self.reason,
            "at_turn_start": self.at_turn_start,
            "thinking_blocks_after_edit": self.thinking_blocks_after_edit,
        }
