"""A view's sums (estimated tokens, marked messages), kept from one request to the next.

A replay records these for every request. A sticky view re-sends the previous one's messages
(less its compaction notice) and adds to its end, so the figures of the messages it shares
are kept from the previous view and only the added ones are estimated: a replay costs what
its new messages cost, not what every view holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import estimate_message_tokens
from ...checks._invariants import shared_start
from ...vocabulary._messages import REPAIRED_KEY, STUBBED_KEY, TRUNCATED_KEY
from ..findings.drops import is_notice

__all__ = ["ViewSums", "ViewTally"]


@dataclass(frozen=True)
class ViewSums:
    tokens: int
    repaired: int
    """Placeholder results for calls that never got one."""
    shortened: int
    """Truncated tool results."""
    stubs: int
    system_prompt: int = 0
    """Tokens of system messages that are in no history message (the prompt factory's)."""
    system_prompt_messages: int = 0
    """How many such messages the view has (they are not history, so none is "left out")."""
    added: int = 0
    """Tokens of what the view adds that is no history message and no system prompt: the
    placeholder results for interrupted calls and the compaction notice."""


class ViewTally:
    """Sums over each view handed to :meth:`sums`, reusing the previous view's per message.

    ``known`` maps ``id`` of a history message to its estimate (the caller keeps those
    messages alive); other messages are estimated with ``family``. Only the latest view and
    its per-message figures are kept.
    """

    def __init__(self, family: str | None, known: Mapping[int, int]) -> None:
        self._family = family
        self._known = known
        self._view: list[Mapping[str, Any]] = []
        # Per message of the latest view: tokens, repaired, shortened, stubbed, system prompt
        # tokens, system prompt messages and added tokens (as ViewSums orders them), and each
        # column's total.
        self._columns: tuple[list[int], ...] = ([], [], [], [], [], [], [])
        self._totals = [0, 0, 0, 0, 0, 0, 0]
        # Estimates of rendered messages by identity (held, so an id cannot be reused): a
        # compacted view re-sends many messages of the views before it.
        self._estimates: dict[int, tuple[Mapping[str, Any], int]] = {}
        self._earlier: dict[int, tuple[Mapping[str, Any], int]] = {}

    def sums(self, view: Sequence[Mapping[str, Any]], *, shared: int | None = None) -> ViewSums:
        """The sums of ``view``; ``shared``: ``shared_start(previous, view)`` for the view this
        tally was handed last, when the caller has counted it already."""
        start = shared_start(self._view, view) if shared is None else shared
        if start == 0:
            self._earlier, self._estimates = self._estimates, {}
        added = view[start:]
        columns, totals = self._columns, self._totals
        # Running totals: what the previous view had past the shared head is taken off and
        # the added messages' figures put on, so a sticky request never sums the whole view.
        for i, column in enumerate(columns):
            totals[i] -= sum(column[start:])
        tokens = [self._estimate(m) for m in added]
        figures = (
            tokens,
            [bool(m.get(REPAIRED_KEY)) for m in added],
            [bool(m.get(TRUNCATED_KEY)) for m in added],
            [bool(m.get(STUBBED_KEY)) for m in added],
            [
                n if m.get("role") == "system" and id(m) not in self._known else 0
                for m, n in zip(added, tokens, strict=True)
            ],
            [m.get("role") == "system" and id(m) not in self._known for m in added],
            [
                n if m.get(REPAIRED_KEY) or is_notice(m) else 0
                for m, n in zip(added, tokens, strict=True)
            ],
        )
        for i, (column, values) in enumerate(zip(columns, figures, strict=True)):
            column[start:] = values
            totals[i] += sum(values)
        self._view = list(view)
        return ViewSums(*totals)

    def _estimate(self, message: Mapping[str, Any]) -> int:
        key = id(message)
        cached = self._known.get(key)
        if cached is not None:
            return cached
        entry = self._estimates.get(key) or self._earlier.get(key)
        if entry is None or entry[0] is not message:
            entry = (message, estimate_message_tokens(message, family=self._family))
        self._estimates[key] = entry
        return entry[1]
