"""How tool calls pair up with their results (``ToolPairing``), one message at a time.

The ids are read by the message vocabulary (``_messages.call_ids``, ``result_ids``); this
module decides which call each result answers, and which results answer none.
"""

from __future__ import annotations

__all__ = ["ToolPairing", "pair_messages"]

from collections.abc import Mapping, Sequence
from typing import Any

from ._messages import call_ids, result_ids


class ToolPairing:
    """Which result answers which call, maintained one message at a time.

    A result belongs to the most recent earlier assistant message that declared its id and is
    still waiting for it; anything else is an orphan. Parallel calls answered by separate
    messages, results interleaved between two assistants, and results carried as blocks all
    land with the right call. Feeding messages in order is a single forward pass, so the
    history index keeps one of these up to date at the cost of the new messages only.
    """

    def __init__(self) -> None:
        self.results_of: dict[int, list[int]] = {}
        """Call position -> positions of the results that answer it, in order."""
        self.owner_of: dict[int, int] = {}
        """Result position -> call position."""
        self.orphans: set[int] = set()
        """Results whose call is unknown (or that answer an id already answered)."""
        self.pending_calls: set[int] = set()
        """Call positions with at least one result still missing."""
        self.answers: dict[int, tuple[str, ...]] = {}
        """Result position -> the ids it actually answered for its call (the rest are stray)."""
        self.late_answers = 0
        """Results that answered a call after other turns had already followed it."""
        self._waiting: dict[str, int] = {}
        self._unanswered: dict[int, set[str]] = {}
        self._size = 0
        self._last_turn = -1  # the latest position that is not a tool result

    def add(self, declared: tuple[str, ...], answered: tuple[str, ...]) -> None:
        """Account for the next message, given the ids it declares and the ids it answers."""
        index = self._size
        self._size += 1
        if answered:
            owner, consumed = self._take(answered)
            if owner is None:
                self.orphans.add(index)
            else:
                missing = self._unanswered[owner]
                missing.difference_update(consumed)
                if not missing:
                    self.pending_calls.discard(owner)
                self.owner_of[index] = owner
                self.results_of[owner].append(index)
                self.answers[index] = consumed
                if owner < self._last_turn:
                    self.late_answers += 1
        else:
            self._last_turn = index
        if declared:
            self.results_of[index] = []
            self._unanswered[index] = set(declared)
            self.pending_calls.add(index)
            for call_id in declared:
                # A reused id leaves the earlier call unanswered: results go to the newest.
                self._waiting[call_id] = index

    def _take(self, answered: tuple[str, ...]) -> tuple[int | None, tuple[str, ...]]:
        """The call a result answers and the ids it answers of it, no longer waiting. One
        message answers one call: ids it also carries for another call are stray (the view
        drops them), so that other call still counts as unanswered."""
        waiting = self._waiting
        if len(answered) == 1:  # a tool message: one lookup
            return waiting.pop(answered[0], None), answered
        owner = next((waiting[i] for i in answered if i in waiting), None)
        consumed = tuple(i for i in answered if owner is not None and waiting.get(i) == owner)
        for call_id in consumed:
            del waiting[call_id]
        return owner, consumed

    def missing(self, call_index: int) -> set[str]:
        """Declared ids of the call at ``call_index`` that no result has answered yet."""
        return self._unanswered.get(call_index, set())


def pair_messages(messages: Sequence[Mapping[str, Any]]) -> ToolPairing:
    """Pair a whole list of messages at once."""
    pairing = ToolPairing()
    for message in messages:
        pairing.add(call_ids(message), result_ids(message))
    return pairing
