"""Passes 6 and 7 of the request pipeline (``_planner``): the statistics of an escalation and
the view that states them, composed with the compaction notice.

**statistics** - the figures of an escalation (before, after, target, what was relaxed), the
notice's own tokens included, and the history position the in-place notice stands before
(``CompactionStats.notice_at``): decided here, once, from the history as it is at the
escalation, so the notice does not move when the active turn or the open tail moves on.
**compose** - systems, body and notice: at the end, or in place before that position.

The composer owns the notice's caches: the longest notice's cost, the notice itself while it
reads the same (consecutive views then share it by identity, and it is estimated once) and the
body before the in-place notice while the decisions and the history stay the same. It never
reads or writes session state.
"""

from __future__ import annotations

__all__ = ["Composer"]

import itertools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..history._history import HistoryIndex
from ..views._decisions import CompactionStats, Decisions, EarlierNotice, LeftOutMap
from ..views._ladder import Step
from ..views._render import (
    NoticeFigures,
    RenderResult,
    ShortForms,
    notice_boundary,
    notice_figures,
    notice_message,
    render_range,
)
from ..vocabulary._messages import call_ids
from ._config import ContextConfig
from ._map_maker import MapMaker
from ._plan import Scope
from ._timing import Timing, thinking_after

_SlotKey = tuple[int, int | None, int]
_Before = tuple[int, Mapping[str, Any] | None]
_MOST_STANDING = 2
"""Earlier notices a view keeps standing at most, beside the latest one."""
_NOTICES_KEPT = 8
"""Notices kept by what they state: a view's (the latest, those standing) and a few more."""


class Composer:
    """Statistics and composition over one history index with one configuration."""

    def __init__(
        self, config: ContextConfig, index: HistoryIndex, forms: ShortForms | None = None
    ) -> None:
        self.config = config
        self.index = index
        self._forms = forms
        """The estimates of shortened forms (the planner's), for the slot's render."""
        self._notice_cost_cache: tuple[object, int] = (None, 0)
        self.maps = MapMaker(config, index)
        # The notices, each kept while what it states is the same (its figures come only from
        # sticky state): consecutive views then share it by identity, and it is estimated once.
        self._notice_cache: dict[object, tuple[Mapping[str, Any], int]] = {}
        # The body before each notice (its length, last message) by (position, tail, generation).
        self._slot: tuple[Decisions, dict[_SlotKey, _Before]] | None = None
        self._shown_memo: tuple[Decisions, frozenset[int], Decisions] | None = None
        self.rendered = 0
        """History messages rendered to place the notice, over every request."""

    def notice_cost(self) -> int:
        """Tokens the longest notice this history could get takes, its map aside (0 with
        notices off): the map has a bound of its own (``ContextConfig.map_bound``)."""
        config = self.config
        if not config.compaction_notice_enabled:
            return 0
        size = len(self.index.facts)
        key = (len(str(size + 1000)), config.compaction_notice_verbosity, self.index.family)
        if self._notice_cost_cache[0] != key:
            largest = NoticeFigures.largest(size)
            cost = max(
                self.index.estimate(notice_message(figures, config.compaction_notice_verbosity))
                for figures in (largest, replace(largest, relaxed=False))
            )
            self._notice_cost_cache = (key, cost)
        return self._notice_cost_cache[1]

    def statistics(
        self,
        scope: Scope,
        step: Step,
        previous: Decisions,
        *,
        before: tuple[int, int],
        after: RenderResult,
        target: int,
        measured: tuple[int | None, int | None] = (None, None),
        timing: Timing | None = None,
        room: int | None = None,
        in_force: CompactionStats | None = None,
    ) -> CompactionStats:
        """The figures of one escalation (with the notice compose adds); ``after``: the body.

        ``room``: what the view, notice included, may take in the units views are sized in
        (the planner's; by default the budget). The notice's map takes at most its share of
        it, and only what the view leaves free: it never makes the view smaller.
        ``in_force``: the statistics of the decisions this escalation started from, when it
        started from those in force: their notices that it leaves standing stay, byte for byte.
        """
        config = self.config
        decisions = step.decisions
        # The escalation knows where it touched the decisions it started from: only those
        # positions are compared (a compacted history leaves out thousands).
        added = decisions.added(previous, step.touched if previous is step.base else None)
        edit = min(itertools.chain(*added), default=len(self.index.facts))
        stats = CompactionStats.of_escalation(
            step.decisions,
            previous,
            level=step.level,
            before=before,
            after=(scope.system_tokens + after.tokens, len(scope.systems) + len(after.messages)),
            systems=len(scope.systems),
            budget=scope.usable,
            target=target,
            protected_recent=config.protected_recent,
            protected_tool_results=config.protected_tool_results,
            history_messages=len(self.index.facts),
            relaxed=(step.results_shortened, step.groups_removed),
            measured_tokens=measured[0],
            overhead_tokens=measured[1],
            reason=None if timing is None else timing.reason,
            at_turn_start=timing is not None and timing.moment.turn_start,
            thinking_blocks_after_edit=thinking_after(self.index, decisions, edit),
            added=added,
        )
        if not self._shows_notice(scope, step.decisions):
            return stats
        if room is None:
            room = scope.budget.effective_budget
        view_tokens = scope.system_tokens + after.tokens
        at: int | None = None
        earlier: tuple[EarlierNotice, ...] = ()
        ahead = False
        if self.in_place:
            shown = self._shown(scope, decisions)
            at = self._notice_position(scope, shown, stats)
            if in_force is not None and previous is step.base and step.touched:
                # ``touched`` holds every position the escalation may have changed.
                changed = min(step.touched)
                earlier = self._still_standing(scope, previous, in_force, changed, at)
                # A new notice placed ahead of what it changed (a turn's opening prompt)
                # would break the view before the change.
                facts = self.index.facts
                ahead = any(facts[q].in_body for q in shown.shown(at, changed))
        figures = notice_figures(stats, decisions, with_map=False)
        plain = self._notice(figures)[1]
        standing = sum(e.tokens for e in earlier)
        if earlier and (ahead or view_tokens + standing + plain > room):
            if view_tokens + standing <= room or standing <= plain:
                # Those standing stay and say what they said, and this escalation adds none:
                # one more would come ahead of what it changed, or there is no room for it
                # (over the budget too, where they take no more than a new one would).
                stats = replace(stats, notice_at=at, earlier_notices=earlier, restated=False)
                return stats.with_notice(standing, len(earlier))
            # No room for all that stood before: the newest of them merge into the new one.
            while earlier and view_tokens + standing + plain > room:
                earlier = earlier[:-1]
                standing = sum(e.tokens for e in earlier)
        # The map is ordered here and made when a view shows it; the notice is counted with
        # the whole room the map was given (``_map_maker``).
        order = self.maps.order(
            figures, decisions, room=room, used=view_tokens + standing, plain=plain, shown=earlier
        )
        stats = replace(stats, notice_at=at, earlier_notices=earlier, left_out_map=order)
        tokens = plain + (0 if order is None else order.bound)
        return stats.with_notice(tokens + standing, len(earlier) + 1)

    def _still_standing(
        self,
        scope: Scope,
        previous: Decisions,
        in_force: CompactionStats,
        changed: int,
        at: int,
    ) -> tuple[EarlierNotice, ...]:
        """The notices in force that this escalation, changing nothing before ``changed``,
        leaves standing where they are: the view up to each, and the message after it, stay
        the same bytes. (Where the message right after a notice changes, the view breaks
        there anyway, and the notice merges into the new one.)"""
        notices = list(in_force.earlier_notices)
        if (
            in_force.restated
            and in_force.notice_at is not None
            and self._shows_notice(scope, previous)
        ):
            own = in_force.notice_room - sum(e.tokens for e in in_force.earlier_notices)
            figures = notice_figures(in_force, previous, with_map=False)
            notices.append(EarlierNotice(in_force.notice_at, figures, in_force.left_out_map, own))
        facts = self.index.facts

        def followed_unchanged(position: int) -> bool:
            # What followed the notice (in the view before, or since) must still follow it
            # unchanged; where that changed, the view breaks right after the notice anyway.
            shown_after = previous.shown(position, len(facts))
            after = next((q for q in shown_after if facts[q].in_body), None)
            return after is None or after < changed

        kept = [
            notice
            for notice in notices
            if notice.position <= min(changed, at) and followed_unchanged(notice.position)
        ]
        return tuple(kept[:_MOST_STANDING])

    def compose(
        self,
        scope: Scope,
        decisions: Decisions,
        stats: CompactionStats | None,
        body: RenderResult,
    ) -> tuple[list[Mapping[str, Any]], int]:
        """The notice-inclusive view for ``decisions`` over its rendered ``body``, and its
        estimate."""
        view = [*scope.systems, *body.messages]
        tokens = scope.system_tokens + body.tokens
        if stats is not None and self._shows_notice(scope, decisions):
            reminder, reminder_tokens = self._notice_for(stats, decisions)
            if self.in_place:
                # Earlier notices still standing first, each where it stood; at one slot the
                # older goes first. Inserted from the back, so each slot stays the body's.
                standing = [self._earlier(e) for e in stats.earlier_notices]
                placed = [
                    (self._slot_of(scope, decisions, e.position), message)
                    for e, (message, _) in zip(stats.earlier_notices, standing, strict=True)
                ]
                if stats.restated:
                    placed.append((self._notice_slot(scope, decisions, stats), reminder))
                else:
                    reminder_tokens = 0
                for slot, message in reversed(sorted(placed, key=lambda p: p[0])):
                    view.insert(len(scope.systems) + slot, message)
                tokens += sum(t for _, t in standing)
            else:
                view.append(reminder)
            tokens += reminder_tokens
        return view, tokens

    def _shows_notice(self, scope: Scope, decisions: Decisions) -> bool:
        c = self.config
        return c.compaction_notice_enabled and not decisions.empty and (
            decisions.level >= c.compaction_notice_min_level
            and (scope.open_tail is None or self.in_place))  # fmt: skip

    @property
    def in_place(self) -> bool:
        """Whether the notice goes in place (at its slot) rather than at the end."""
        return self.config.compaction_notice_placement == "in_place"

    def _notice_slot(self, scope: Scope, decisions: Decisions, stats: CompactionStats) -> int:
        """Where the in-place notice goes in the body: before the first message rendered from
        the position the latest escalation decided (``notice_at``; ``_notice_position``).

        The position was fixed at the escalation, so the slot and the notice stay put until the
        next one: consecutive requests then start with the previous one whole.
        """
        position = stats.notice_at
        if position is None:
            position = self._notice_position(scope, self._shown(scope, decisions), stats)
        return self._slot_of(scope, decisions, position)

    def _shown(self, scope: Scope, decisions: Decisions) -> Decisions:
        """``decisions`` with the retained reminders shown whole: the same object while the
        two are the same, so the caches keyed on it hold across a retaining session."""
        if not scope.retained:
            return decisions
        memo = self._shown_memo
        if memo is None or memo[0] is not decisions or memo[1] != scope.retained:
            memo = self._shown_memo = (decisions, scope.retained, decisions.without(scope.retained))
        return memo[2]

    def _slot_of(self, scope: Scope, decisions: Decisions, position: int) -> int:
        """The body's index of a notice that stands before history ``position``."""
        shown = self._shown(scope, decisions)
        if scope.open_tail is not None:
            # The call still being executed stays last: the notice never follows it.
            position = min(position, scope.open_tail)
        return self._before(scope, shown, position)[0]

    def _notice_position(self, scope: Scope, shown: Decisions, stats: CompactionStats) -> int:
        """The history position the in-place notice stands before, decided from the history
        as it is now: the first position the latest escalation reduced (``notice_boundary``),
        a boundary between whole tool rounds, so the notice never separates a call from its
        results. It is decided once, at the escalation (``statistics``): what it reads, the
        open tail and the active turn, move on with the history, and the notice must not."""
        boundary = notice_boundary(shown, stats, len(self.index.facts))
        if scope.open_tail is not None:
            boundary = min(boundary, scope.open_tail)
        opening = self._active_turn_start()
        if boundary > opening and _is_answer(self._before(scope, shown, boundary)[1]):
            # Right after an answer the notice would be a user turn of its own inside the
            # active turn: the provider would read the active turn as starting after it (and,
            # with thinking on, refuse the answer after it). It joins the user turn that opens
            # the active turn instead.
            return opening
        return boundary

    def _before(
        self, scope: Scope, shown: Decisions, stop: int
    ) -> tuple[int, Mapping[str, Any] | None]:
        """How many messages the body renders from the positions before ``stop``, and the
        last of them (kept while the decisions and the history stay the same: a request
        between escalations renders nothing for its notice)."""
        index = self.index
        key = (stop, scope.open_tail, index.generation)
        if self._slot is None or self._slot[0] is not shown or len(self._slot[1]) > 16:
            self._slot = (shown, {})
        known = self._slot[1].get(key)
        if known is not None:
            return known
        before = render_range(
            index,
            shown,
            0,
            stop,
            open_tail=scope.open_tail,
            keep_chars=self.config.truncate_chars,
            forms=self._forms,
        )
        self.rendered += before.rendered
        found = (len(before.messages), before.messages[-1] if before.messages else None)
        self._slot[1][key] = found
        return found

    def _active_turn_start(self) -> int:
        """The first position of the user turn that opens the active turn (0: the active turn
        opens the conversation), as the turn rule reads the history."""
        anchor = self.index.turns.active().anchor
        return anchor[0] if anchor else 0

    def _notice_for(
        self, stats: CompactionStats, decisions: Decisions
    ) -> tuple[Mapping[str, Any], int]:
        """The notice for ``decisions`` and its estimate (the same dict while it reads the same)."""
        figures = notice_figures(stats, decisions, with_map=False)
        return self._mapped(figures, stats.left_out_map)

    def _earlier(self, notice: EarlierNotice) -> tuple[Mapping[str, Any], int]:
        """A notice still standing and its estimate."""
        return self._mapped(notice.figures, notice.left_out_map)

    def _mapped(
        self, figures: NoticeFigures, order: LeftOutMap | None
    ) -> tuple[Mapping[str, Any], int]:
        """The notice that states ``figures`` with the map ``order`` (made now if no view
        showed it: the notices standing beside it are made first, their names not repeated)."""
        lines = self.maps.lines(order, lambda standing: self._earlier(standing)[0])
        return self._notice(replace(figures, left_out_map=lines))

    def _notice(self, figures: NoticeFigures) -> tuple[Mapping[str, Any], int]:
        """The notice that states ``figures`` and its estimate."""
        key = (figures, self.config.compaction_notice_verbosity, self.index.family)
        cache = self._notice_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= _NOTICES_KEPT:
                cache.clear()
            message = notice_message(figures, self.config.compaction_notice_verbosity)
            found = cache[key] = (message, self.index.estimate(message))
        return found


def _is_answer(message: Mapping[str, Any] | None) -> bool:
    """An assistant message that makes no call: a user message after it starts a turn."""
    return message is not None and message.get("role") == "assistant" and not call_ids(message)
