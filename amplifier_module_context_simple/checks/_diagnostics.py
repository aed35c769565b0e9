"""Warnings a user can act on, each logged once per change rather than once per request."""

from __future__ import annotations

__all__ = [
    "MAX_LISTED_REPAIRS",
    "OVERHEAD_WARN_CHANGE",
    "Diagnostics",
]

import logging
from typing import TYPE_CHECKING

from ..history._project import PAIRING_KINDS

if TYPE_CHECKING:  # the views half does not import the sizing half at run time
    from ..sizing._budget import Budget

logger = logging.getLogger(__name__)

MAX_LISTED_REPAIRS = 10
#: The outside-the-context warning is repeated only when the overhead moved by more than this.
OVERHEAD_WARN_CHANGE = 0.10


class Diagnostics:
    """Remembers what was last reported so a long session logs a handful of lines."""

    def __init__(self) -> None:
        self.repairs: tuple[str, ...] = ()
        self._pairing: tuple[str, ...] = ()
        self._kinds_seen: set[str] = set()
        self._warned_for: object = None
        self._over_budget_for: object = None
        self._warned_overhead: int | None = None
        self._starved_for: object = None
        self._warned_learned: int | None = None

    def report_repairs(self, repaired: list[str]) -> None:
        """What the view repaired: unpaired tool messages, and projections onto the host model.

        Entries start with their kind (``"kind: detail"``). A damaged pairing is worth a
        warning whenever it changes; projections are routine for imported data, so each kind
        is mentioned once (at info level) rather than once per request.
        """
        current = tuple(repaired)
        previous = self.repairs
        # A growing session repeats the previous list and appends to it: only the new entries
        # are read, so a request stays O(new messages) even when every message is projected.
        grown = len(current) >= len(previous) and current[: len(previous)] == previous
        fresh = current[len(previous) :] if grown else current
        new_pairing = tuple(r for r in fresh if _kind(r) in PAIRING_KINDS)
        pairing = (self._pairing if grown else ()) + new_pairing
        if pairing and pairing != self._pairing:
            listed = "; ".join(pairing[:MAX_LISTED_REPAIRS])
            more = len(pairing) - MAX_LISTED_REPAIRS
            logger.warning(
                "context-simple: the history holds unpaired tool messages; the view %s%s",
                listed,
                f" (+{more} more)" if more > 0 else "",
            )
        self._pairing = pairing
        kinds = {_kind(r) for r in fresh} - PAIRING_KINDS - self._kinds_seen
        if kinds:
            self._kinds_seen |= kinds
            logger.info(
                "context-simple: the view projects messages onto the host's model (%s); the "
                "history keeps them as admitted",
                ", ".join(sorted(kinds)),
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

    def warn_if_over_budget(
        self, decisions: object, *, view_tokens: int, budget: int, parts: Budget | None = None
    ) -> None:
        """The floor alone does not fit: the view goes out over the budget (once per decisions).

        When what the request carries besides the view (output, tool definitions, learned
        overhead) leaves it no room at all, that is the warning instead, once per figures.
        """
        if parts is not None and parts.starved:
            key = parts.payload()
            if key != self._starved_for:
                self._starved_for = key
                logger.warning(
                    "context-simple: no view can fit this request: %s; the provider will "
                    "refuse it - send fewer or smaller tools, ask for less output, or use a "
                    "larger window",
                    parts.parts_text(),
                )
            return
        if view_tokens <= budget or decisions is self._over_budget_for:
            return
        self._over_budget_for = decisions
        logger.warning(
            "context-simple: the view (~%d tokens) is over the budget (%d) even with every "
            "protection relaxed: the system messages, the first and latest user prompt, the "
            "retained reminders and the active tool round alone are that large; shorten them or "
            "raise the budget (get_messages_for_request_retaining(hard_fit=True) refuses such "
            "a request instead)",
            view_tokens,
            budget,
        )

    def warn_learned_overhead(self, budget: Budget) -> None:
        """The overhead the readings showed crowds the view out: said once, and again only
        when it moves by more than ``OVERHEAD_WARN_CHANGE``."""
        learned = budget.learned_overhead_tokens
        last = self._warned_learned
        if last is not None and abs(learned - last) <= OVERHEAD_WARN_CHANGE * last:
            return
        self._warned_learned = learned
        logger.warning(
            "context-simple: the provider counts about %d tokens per request that neither the "
            "view nor the tool definitions account for (hook injections, provider framing); "
            "they leave the view less than its compaction target: %s",
            learned,
            budget.parts_text(),
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


def _kind(repair: str) -> str:
    return repair.partition(":")[0]
