"""Each escalation's map of what its view left out: ordered at the escalation, made when a
view first shows it.

An escalation that leaves messages out or shortens results gives its notice a map
(``_left_out_map``) and the room the map may take: its share of the budget, and no more
than the view and the notice leave free. The notice is counted with that whole room in every
figure that decides anything, so no decision depends on what the map turns out to hold.
That lets the map be made late: a running session makes it at the escalation's own view, a
resume's walk (``_catch_up``), which re-makes every escalation of the session and shows only
the last view, makes only the maps that view shows (reading every left-out message of a long
session once per escalation had made a resume several times slower).

Made late or at once, a map is the same bytes: it is made from what its order fixed (the
decisions, the history as long as it was then, the notices that stood beside it).
"""

from __future__ import annotations

__all__ = ["MapMaker", "held_to"]

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..history._history import HistoryIndex
from ..views._decisions import Decisions, EarlierNotice, LeftOutMap, NoticeFigures
from ..views._left_out_map import build_map
from ..views._map_reading import LineReader, PassedNames
from ..views._notice import notice_message
from ._config import ContextConfig

MessageOf = Callable[[EarlierNotice], Mapping[str, Any]]
"""The message of a notice standing beside a map (its names are not listed again)."""


class MapMaker:
    """Orders and makes the maps of one history's escalations."""

    def __init__(self, config: ContextConfig, index: HistoryIndex) -> None:
        self.config = config
        self.index = index
        self._reader = LineReader(index)
        self._passed = PassedNames(index)

    def order(
        self,
        figures: NoticeFigures,
        decisions: Decisions,
        *,
        room: int,
        used: int,
        plain: int,
        shown: tuple[EarlierNotice, ...],
    ) -> LeftOutMap | None:
        """The map of what ``decisions`` leave out, for a notice that states ``figures``
        besides it (``plain`` tokens): its share of ``room``, and no more than the view
        (``used``, its notices aside from this one) and the notice leave of it. ``None``
        when there is nothing to map or no room for it."""
        bound = min(self.config.map_bound(room), room - used - plain)
        if bound <= 0 or decisions.empty:
            return None
        return LeftOutMap(decisions, figures, shown, bound=bound, length=len(self.index.facts))

    def lines(self, order: LeftOutMap | None, message_of: MessageOf) -> tuple[str, ...]:
        """The lines of the map ``order`` (made now if no view showed it yet)."""
        if order is None:
            return ()
        if not order.made:
            order.keep(self._make(order, message_of))
        return order.lines

    def _make(self, order: LeftOutMap, message_of: MessageOf) -> tuple[str, ...]:
        """The lines are measured one by one; the notice as a whole is then held to the
        bound (an estimate is not quite additive), dropping the oldest lines while over."""
        decisions, figures, shown = order.recipe()
        index = self.index
        verbosity = self.config.compaction_notice_verbosity
        plain = index.estimate(notice_message(figures, verbosity))
        lines = build_map(
            index,
            decisions,
            # What earlier notices still standing list is in the view already.
            shown=[message_of(e) for e in shown],
            reader=self._reader,
            bound=order.bound,
            measure=_rough_tokens,
            length=order.length,
            passed=self._passed.passed_before(order.length),
        )

        def cost(kept: tuple[str, ...]) -> int:
            mapped = replace(figures, left_out_map=kept)
            return index.estimate(notice_message(mapped, verbosity)) - plain

        return held_to(order.bound, lines, cost)


def held_to(
    bound: int, lines: tuple[str, ...], cost: Callable[[tuple[str, ...]], int]
) -> tuple[str, ...]:
    """``lines`` cut from the end until their ``cost`` is within ``bound`` (the longest head
    that fits, for a cost that grows with every line); a heading (the first line) is never
    kept without a line under it, so two lines over the bound become none."""
    while lines:
        if cost(lines) <= bound:
            break
        lines = lines[:-1] if len(lines) > 2 else ()
    return lines


def _rough_tokens(text: str) -> int:
    """A map line's or name's tokens, on the high side (names run 2-4 characters a token): the
    map is filled by it, then the notice as a whole is held to the bound by the estimator
    (estimating every name of every escalation cost a resume's walk more than the rest)."""
    return len(text) // 2 + 1
