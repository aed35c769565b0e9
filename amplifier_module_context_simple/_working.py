"""The working copy of the decisions while one escalation is planned.

The ladder's rungs, the fit pass and turn mending all edit it; it becomes an immutable
:class:`Decisions` only when a step is yielded. It remembers how each message it takes out
was shown, so mending can bring a message back exactly as short as it was.
"""

from __future__ import annotations

__all__ = ["WorkingPlan"]

from types import MappingProxyType

from ._decisions import Decisions
from ._history import HistoryIndex
from ._render import stubbed, truncated


class WorkingPlan:
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
        self.restored: dict[int, int] = {}
        """Position mending had to bring back -> the head of the round it keeps a prompt out of.

        Removing it again would only undo the mending while that round is shown; once the
        round itself is left out, nothing needs it any more."""
        self.pinned: int | None = None
        """A position no rung may remove (it may still be shortened)."""
        self.short: dict[int, int] = {}
        """Estimated tokens of a shortened form, remembered from when it was planned."""
        self._hide_results_of_left_out_calls()

    def _hide_results_of_left_out_calls(self) -> None:
        """Leave out every result whose call is left out: the render never shows one without
        its call, so the plan must not count it as shown (or shortening it would seem to save
        tokens the view never spent).

        The rungs remove whole rounds, but two things leave such a result outside ``removed``:
        a rewritten history whose change falls inside a left-out round (the decisions before
        the change keep the call out, the results after it get no decision), and a late
        result answering a call that was already left out.
        """
        removed, results_of = self.removed, self.index.pairing.results_of
        for call in removed.intersection(results_of):
            for result in results_of[call]:
                if result not in removed:
                    self.take_out(result)

    def locked(self, position: int) -> bool:
        """Whether removing ``position`` would undo a mending whose round is still shown."""
        reason = self.restored.get(position)
        return reason is not None and reason not in self.removed

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

    def put_back(self, position: int, reason: int) -> None:
        """Show ``position`` again, shortened or stubbed as it was before it was left out.

        ``reason`` is the head of the round the restored message keeps a prompt out of.
        """
        self.removed.discard(position)
        self.relaxed.discard(position)
        self.restored[position] = reason
        truncated, stubbed = self.taken_out.pop(position, (None, None))
        if truncated is not None:
            self.truncated[position] = truncated
        if stubbed is not None:
            self.stubbed[position] = stubbed

    def reductions(self) -> tuple[frozenset[int], dict[int, int], dict[int, int]]:
        """What the view leaves out, shortens and stubs right now (to tell a real change from
        one that mending undid)."""
        return frozenset(self.removed), dict(self.truncated), dict(self.stubbed)

    def decisions(self, level: int, escalations: int) -> Decisions:
        return Decisions(
            removed=frozenset(self.removed),
            truncated=MappingProxyType(dict(self.truncated)),
            stubbed=MappingProxyType(dict(self.stubbed)),
            level=level,
            escalations=escalations,
            relaxed=frozenset(self.relaxed),
        )
