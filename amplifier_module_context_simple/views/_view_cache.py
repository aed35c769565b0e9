"""The rendered-prefix cache that keeps a request's cost proportional to what is new.

Between escalations the decisions do not change, so everything rendered for the previous
request is still right; only messages after it (and the call still being executed) need
rendering. The cache is keyed on the decisions object and the history index's generation, and
drops itself when either changes.
"""

from __future__ import annotations

__all__ = [
    "PrefixCache",
]

from ..history._history import HistoryIndex
from ._decisions import Decisions
from ._render import RenderResult, ShortForms, render_range


class PrefixCache:
    """The rendered prefix of the last request, extended in place by later ones."""

    def __init__(self, forms: ShortForms | None = None) -> None:
        self._forms = forms
        """The estimates of shortened forms (the planner's): a new prefix weighs the shortened
        messages the previous one had already weighed."""
        self._decisions: Decisions | None = None
        self._generation = -1
        self._stop = 0
        self._prefix = RenderResult()
        self.rendered = 0
        """History messages rendered so far, over every request (what the cache saves)."""

    def clear(self) -> None:
        self._decisions = None

    def render(
        self,
        index: HistoryIndex,
        decisions: Decisions,
        *,
        open_tail: int | None,
        retained: frozenset[int],
        keep_chars: int,
    ) -> RenderResult:
        size = len(index.facts)
        if retained and not all(
            p not in decisions.removed
            and p not in decisions.truncated
            and p not in decisions.stubbed
            for p in retained
        ):
            # Request-scoped: rendered from scratch, never cached.
            whole = render_range(
                index, decisions.without(retained), 0, size, open_tail=open_tail,
                keep_chars=keep_chars, forms=self._forms,
            )  # fmt: skip
            self.rendered += whole.rendered
            return whole
        # Only the call the orchestrator is still executing can gain results in place; an
        # older interrupted call that later gets answered bumps the index generation.
        stable = size if open_tail is None else open_tail
        prefix = self._extend(index, decisions, stable, open_tail=open_tail, keep_chars=keep_chars)
        tail = render_range(
            index, decisions, stable, size, open_tail=open_tail, keep_chars=keep_chars,
            forms=self._forms,
        )  # fmt: skip
        self.rendered += tail.rendered
        result = RenderResult()
        result.messages = [*prefix.messages, *tail.messages]
        result.tokens = prefix.tokens + tail.tokens
        result.repaired = [*prefix.repaired, *tail.repaired]
        return result

    def tokens(self, index: HistoryIndex, decisions: Decisions, *, keep_chars: int) -> int:
        """The estimate ``render`` gives a history with no open tail call and nothing retained,
        without building the body's list: a catch-up walk asks this at every request point."""
        return self._extend(
            index, decisions, len(index.facts), open_tail=None, keep_chars=keep_chars
        ).tokens

    def _extend(
        self,
        index: HistoryIndex,
        decisions: Decisions,
        stable: int,
        *,
        open_tail: int | None,
        keep_chars: int,
    ) -> RenderResult:
        """The cached prefix, rendered up to ``stable`` (started afresh when the decisions or
        the history's generation changed, or when it reaches past ``stable``)."""
        if (
            self._decisions is not decisions
            or self._generation != index.generation
            or self._stop > stable
        ):
            self._decisions, self._generation = decisions, index.generation
            self._stop, self._prefix = 0, RenderResult()
        prefix = self._prefix
        grown = render_range(
            index, decisions, self._stop, stable, open_tail=open_tail, keep_chars=keep_chars,
            forms=self._forms,
        )  # fmt: skip
        prefix.messages.extend(grown.messages)
        prefix.tokens += grown.tokens
        prefix.repaired.extend(grown.repaired)
        self._stop = stable
        self.rendered += grown.rendered
        return prefix
