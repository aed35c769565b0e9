"""Warnings a user can act on, each logged once per change rather than once per request."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

MAX_LISTED_REPAIRS = 10
#: The outside-the-context warning is repeated only when the overhead moved by more than this.
OVERHEAD_WARN_CHANGE = 0.10


class Diagnostics:
    """Remembers what was last reported so a long session logs a handful of lines."""

    def __init__(self) -> None:
        self.repairs: tuple[str, ...] = ()
        self._warned_for: object = None
        self._warned_overhead: int | None = None

    def report_repairs(self, repaired: list[str]) -> None:
        """What the view had to repair in a damaged history (orphans left out, placeholders)."""
        current = tuple(repaired)
        if current and current != self.repairs:
            listed = "; ".join(current[:MAX_LISTED_REPAIRS])
            more = len(current) - MAX_LISTED_REPAIRS
            logger.warning(
                "context-simple: the history holds unpaired tool messages; the view %s%s",
                listed,
                f" (+{more} more)" if more > 0 else "",
            )
        self.repairs = current

    def warn_if_above_target(
        self,
        decisions: object,
        *,
        view_tokens: int,
        system_tokens: int,
        target: int,
        overhead: int = 0,
    ) -> None:
        """After an escalation that could not reach the target: say why, once per decisions.

        ``view_tokens`` and ``target`` are in the same (modelled real) units; ``overhead``
        is the modelled part of every request that is outside the context.
        """
        if view_tokens <= target or decisions is self._warned_for:
            return
        self._warned_for = decisions
        if overhead > target / 2:
            why = (
                f"about {overhead} tokens of each request are outside this context (tool "
                "definitions, system overlays); send fewer tools or overlays, or raise the budget"
            )
        elif system_tokens > target:
            why = (
                f"the system messages alone take ~{system_tokens} tokens, more than the "
                "compaction target; shorten the system prompt or raise the budget"
            )
        else:
            why = (
                "protected content (first/last prompt, recent messages, the latest tool "
                "results) is too large; lower protected_recent or protected_tool_results"
            )
        logger.warning(
            "context-simple: the view (~%d tokens) stays above the compaction target (%d) "
            "after compaction: %s",
            view_tokens,
            target,
            why,
        )

    def warn_outside_context(self, *, measured: int, overhead: int, budget: int) -> None:
        """The real figure is over the trigger and compaction has nothing left to change.

        Logged once, and again only when the overhead moves by more than
        ``OVERHEAD_WARN_CHANGE`` of the overhead last warned about.
        """
        last = self._warned_overhead
        if last is not None and abs(overhead - last) <= OVERHEAD_WARN_CHANGE * last:
            return
        self._warned_overhead = overhead
        logger.warning(
            "context-simple: the last request measured ~%d tokens of a %d-token budget and "
            "compaction has nothing left to reduce; about %d tokens of each request are "
            "outside this context (tool definitions, system overlays): send fewer or smaller "
            "tools and overlays, raise the budget, or lower protected_recent / "
            "protected_tool_results",
            measured,
            budget,
            overhead,
        )
