"""The working copy of the decisions while one escalation is planned.

The ladder's rungs, the fit pass and turn mending all edit it; it becomes an immutable
:class:`Decisions` only when a step is yielded. It remembers how each message it takes out
was shown, so mending can bring a message back exactly as short as it was.

A compacted history is mostly left out, and an escalation walks it several times (each rung,
each mending): the walks go over the positions the plan shows (``shown``), never over every
position of the history, and what a rung changed is read from the positions it touched. Nor
is the base's left-out set copied (:class:`LeftOut`): a resume re-derives hundreds of
escalations, and each would copy nearly the whole history.
"""

from __future__ import annotations

__all__ = ["LeftOut", "WorkingPlan"]

import itertools
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from types import MappingProxyType

from ..history._history import HistoryIndex
from ._decisions import Decisions
from ._forms import ShortForms

_State = tuple[bool, int | None, int | None]
"""How one position is shown: (left out, truncated, stubbed)."""


class LeftOut(AbstractSet[int]):
    """The positions a working plan leaves out: the base's frozen set, read through what this
    escalation changed, so that making a plan never copies the base's (nearly the whole
    history, once a long session has compacted).

    ``taken`` holds every position taken out since it was last put back: of the positions a
    plan lists (what the base shows, and what was put back), exactly those are left out, so
    walks filter them with ``taken.__contains__`` in C. ``back`` holds the base's positions
    shown now (put back or retained, not taken out since). Read as a set (the rest of the
    ``Set`` protocol: comparisons and set operations, iterating the whole).
    """

    __slots__ = ("_in_base", "back", "base", "taken")

    def __init__(self, base: frozenset[int], back: Iterable[int]) -> None:
        self.base = base
        self.back = {p for p in back if p in base}
        self.taken: set[int] = set()
        self._in_base = 0
        """How many of ``taken`` are in ``base`` (put back, then taken out again)."""

    def __contains__(self, position: object) -> bool:
        return position in self.taken or (position in self.base and position not in self.back)

    def __len__(self) -> int:
        return len(self.base) - len(self.back) + len(self.taken) - self._in_base

    def __iter__(self) -> Iterator[int]:
        base, back = self.base, self.back
        yield from (itertools.filterfalse(back.__contains__, base) if back else base)
        yield from (p for p in self.taken if p not in base)

    def add(self, position: int) -> None:
        # Read without ``in self``: a first escalation takes out most of a long history.
        taken = self.taken
        if position in taken:
            return
        if position in self.base:
            back = self.back
            if position not in back:
                return  # left out by the base, never shown again
            back.discard(position)
            self._in_base += 1
        taken.add(position)

    def discard(self, position: int) -> None:
        taken = self.taken
        if position in taken:
            taken.discard(position)
            if position in self.base:
                self._in_base -= 1
                self.back.add(position)
        elif position in self.base:
            self.back.add(position)

    def frozen(self) -> frozenset[int]:
        """The positions as one frozenset, copied from ``base`` in C (once, unless some of it
        was put back)."""
        base, back = self.base, self.back
        out = [p for p in self.taken if p not in base]
        if not back and not out:
            return base
        removed = base.difference(back) if back else base
        return removed.union(out) if out else removed

    def mark(self) -> tuple[frozenset[int], frozenset[int]]:
        """What has changed so far, for ``since``."""
        return frozenset(self.taken), frozenset(self.back)

    def since(self, mark: tuple[frozenset[int], frozenset[int]]) -> set[int]:
        """The positions left out now that were not at ``mark``: all were taken out since."""
        taken, back = mark
        base = self.base
        return {p for p in self.taken if p not in taken and (p not in base or p in back)}

    def membership(self) -> Callable[[int], bool]:
        """A C-level test of being left out, for a walk over positions a plan may not list
        (a long list: materialized only when the base leaves something out)."""
        if not self.base:
            return self.taken.__contains__
        return self.frozen().__contains__


class WorkingPlan:
    """Mutable working copy of the decisions during one escalation."""

    def __init__(
        self,
        index: HistoryIndex,
        base: Decisions,
        retained: frozenset[int],
        usage: int,
        *,
        forms: ShortForms | None = None,
    ) -> None:
        self.index = index
        self.forms = ShortForms(index) if forms is None else forms
        """The estimates of shortened forms (the planner's, kept between escalations)."""
        self.base = base
        self.retained = retained
        self.size = size = len(index.facts)
        self.removed = LeftOut(base.removed, retained)
        self.truncated = {k: v for k, v in base.truncated.items() if k not in retained}
        self.stubbed = {k: v for k, v in base.stubbed.items() if k not in retained}
        self.relaxed = set(base.relaxed) - retained
        self.usage = usage
        self.changed = False
        self.taken_out: dict[int, tuple[int | None, int | None]] = {}
        """How a position left out during this escalation was shown before (truncated, stubbed)."""
        self.restored: dict[int, int] = {}
        """Position mending had to bring back -> the head of the round it keeps a prompt out of.

        Removing it again would only undo the mending while that round is shown; once the
        round itself is left out, nothing needs it any more."""
        self.pinned: int | None = None
        """A position no rung may remove (it may still be shortened)."""
        shown = base.shown(0, size)
        self._candidates: list[int] | range = shown if isinstance(shown, range) else list(shown)
        """Ascending positions that include every one the plan shows: what ``base`` shows and
        what the plan put back (a position taken out stays listed; walks skip it)."""
        back = [p for p in retained if p < size and p in base.removed]
        if back:
            self._candidates = sorted({*self._candidates, *back})
        self._inserted = 0
        """How many positions ``put_back`` added to ``_candidates`` (a walk then looks again)."""
        self._results: tuple[int, list[int]] = (-1, [])
        """The tool results among the candidates, listed when ``_inserted`` was the first."""
        self._touched: set[int] = set()
        """Every position the rungs, the fit pass or mending changed (``reduced``)."""
        self._hidden = self._hide_results_of_left_out_calls()

    def _hide_results_of_left_out_calls(self) -> frozenset[int]:
        """Leave out every result whose call is left out: the render never shows one without
        its call, so the plan must not count it as shown (or shortening it would seem to save
        tokens the view never spent). Returns the results it left out.

        The rungs remove whole rounds, but two things leave such a result outside ``removed``:
        a rewritten history whose change falls inside a left-out round (the decisions before
        the change keep the call out, the results after it get no decision), and a late
        result answering a call that was already left out.
        """
        removed, pairing = self.removed, self.index.pairing
        # Found before any is taken out: only the calls left out when the plan is made count
        # (a result that is itself a call, hidden here, does not hide its own results). Read
        # from whichever is shorter: the calls left out, or what is shown.
        if len(removed) <= len(self._candidates):
            calls = [c for c in self.base.removed.intersection(pairing.results_of) if c in removed]
            hidden = [r for c in calls for r in pairing.results_of[c] if r not in removed]
        else:
            owner_of = pairing.owner_of
            hidden = [p for p in self.shown_list() if owner_of.get(p, -1) in removed]
        for result in hidden:
            self.take_out(result)
        self._touched.clear()  # ``reduced`` compares with the plan as made, results hidden
        return frozenset(hidden)

    def shown(self) -> Iterator[int]:
        """The positions the plan shows, ascending, read as the walk goes: a position taken
        out ahead of the walk is skipped and one put back ahead of it is visited (as a walk of
        the whole history that skips what is removed would)."""
        candidates = self._candidates
        if isinstance(candidates, range):
            # Every position is listed: nothing put back can be missing from it.
            return itertools.filterfalse(self.removed.taken.__contains__, candidates)
        return self._walk(candidates)

    def _walk(self, candidates: list[int]) -> Iterator[int]:
        taken, start = self.removed.taken, 0
        while True:
            inserted = self._inserted
            for position in itertools.filterfalse(
                taken.__contains__, itertools.islice(candidates, start, None)
            ):
                yield position
                if self._inserted != inserted:
                    # Put back where it was missing: read the list again after this one.
                    start = bisect_right(candidates, position)
                    break
            else:
                return

    def shown_list(self) -> list[int]:
        """The positions the plan shows now, ascending."""
        return list(itertools.filterfalse(self.removed.taken.__contains__, self._candidates))

    def shown_results(self) -> list[int]:
        """The tool results the plan shows now, ascending."""
        if self._results[0] != self._inserted:
            facts = self.index.facts
            listed = [p for p in self._candidates if facts[p].tool_result]
            self._results = (self._inserted, listed)
        return list(itertools.filterfalse(self.removed.taken.__contains__, self._results[1]))

    def locked(self, position: int) -> bool:
        """Whether removing ``position`` would undo a mending whose round is still shown."""
        reason = self.restored.get(position)
        return reason is not None and reason not in self.removed

    def rendered_tokens(self, position: int, keep_chars: int) -> int:
        if position in self.truncated:
            return self.forms.truncated_tokens(position, self.truncated[position], keep_chars)
        if position in self.stubbed:
            return self.forms.stubbed_tokens(position)
        return self.index.facts[position].tokens

    def _state(self, position: int) -> _State:
        left_out = self.removed  # read inline: ``reduced`` asks for every position touched
        return (
            position in left_out.taken
            or (position in left_out.base and position not in left_out.back),
            self.truncated.get(position),
            self.stubbed.get(position),
        )

    def _start_state(self, position: int) -> _State:
        """How ``position`` was shown when the plan was made (results hidden)."""
        if position in self._hidden:
            return (True, None, None)
        if position in self.retained:
            return (False, None, None)
        base = self.base
        return (
            position in base.removed,
            base.truncated.get(position),
            base.stubbed.get(position),
        )

    def truncate(self, position: int, original_tokens: int) -> None:
        """Show ``position`` truncated (``original_tokens``: the figure its marker states)."""
        self._touched.add(position)
        self.truncated[position] = original_tokens

    def stub(self, position: int, length: int) -> None:
        """Show ``position`` as a stub (``length``: the original's characters)."""
        self._touched.add(position)
        self.stubbed[position] = length

    def take_out(self, position: int) -> None:
        """Leave ``position`` out, remembering how it was shown in case it has to come back."""
        self._touched.add(position)
        left_out = self.removed
        if left_out.base:
            left_out.add(position)
        else:  # nothing to read through (a first escalation takes out most of the history)
            left_out.taken.add(position)
        truncated, stubbed = self.truncated.pop(position, None), self.stubbed.pop(position, None)
        if truncated is not None or stubbed is not None:
            self.taken_out[position] = (truncated, stubbed)

    def put_back(self, position: int, reason: int) -> None:
        """Show ``position`` again, shortened or stubbed as it was before it was left out.

        ``reason`` is the head of the round the restored message keeps a prompt out of.
        """
        self._touched.add(position)
        self.removed.discard(position)
        self.relaxed.discard(position)
        self.restored[position] = reason
        truncated, stubbed = self.taken_out.pop(position, (None, None))
        if truncated is not None:
            self.truncated[position] = truncated
        if stubbed is not None:
            self.stubbed[position] = stubbed
        candidates = self._candidates
        at = bisect_left(candidates, position)
        if at == len(candidates) or candidates[at] != position:
            assert isinstance(candidates, list)  # a range lists every position
            candidates.insert(at, position)
            self._inserted += 1

    def reduced(self) -> bool:
        """Whether the view leaves out, shortens or stubs anything other than when the plan
        was made (a rung whose changes mending undid changed nothing)."""
        return any(self._state(p) != self._start_state(p) for p in self._touched)

    @property
    def touched(self) -> frozenset[int]:
        """Every position whose reductions may differ from ``base``'s."""
        return self._hidden.union(self.retained, self._touched)

    def later(
        self, level: int, escalations: int, touched: frozenset[int] | None = None
    ) -> Callable[[], Decisions]:
        """The decisions as they stand now, built when first called (the plan may go on
        changing meanwhile): only what was touched is copied now (``touched``: ``self.touched``
        when the caller has it already)."""
        base, candidates, size = self.base, self._candidates, self.size
        if touched is None:
            touched = self.touched
        # Where being left out differs from ``base`` (untouched positions never do).
        left_out, then = self.removed, touched.intersection(base.removed)
        now = touched.intersection(left_out.taken).union(then.difference(left_out.back))
        back, out = then - now, now - then
        truncated, stubbed = (
            MappingProxyType(dict(self.truncated)),
            MappingProxyType(dict(self.stubbed)),
        )
        relaxed = frozenset(self.relaxed)

        def build() -> Decisions:
            # Copies of ``base`` (a set copy is C-level and cheaper than any toggle per
            # element): one in the usual case, where nothing of ``base`` was put back.
            removed = base.removed.difference(back) if back else base.removed
            if out:
                removed = removed.union(out)
            decisions = Decisions(
                removed=removed,
                truncated=truncated,
                stubbed=stubbed,
                level=level,
                escalations=escalations,
                relaxed=relaxed,
            )
            # ``candidates`` only grows, and what it gains was left out at this point.
            shown = list(itertools.filterfalse(removed.__contains__, candidates))
            decisions.know_shown(size, shown)
            return decisions

        return build

    def decisions(self, level: int, escalations: int) -> Decisions:
        decisions = Decisions(
            removed=self.removed.frozen(),
            truncated=MappingProxyType(dict(self.truncated)),
            stubbed=MappingProxyType(dict(self.stubbed)),
            level=level,
            escalations=escalations,
            relaxed=frozenset(self.relaxed),
        )
        decisions.know_shown(self.size, self.shown_list())
        return decisions
