"""The turn rule: which messages open the turn a provider reads as the current one.

A provider merges consecutive turns of one role and lifts system messages out of the
conversation. Anthropic reads the final assistant turn as everything after the last user turn
that carries no tool result, and with thinking on the first assistant message of that turn
must start with a thinking block (``PROVIDER-RULES.md``, Anthropic 6). So a prompt typed right
after a tool result, or a hook reminder there, merges into that round's user turn and opens
nothing; a user turn right after a call carries its results (or the view's placeholder).

:class:`TurnReader` is that reading, fed one message at a time. The floor, turn mending, the
decisions kept after a history rewrite (``_protection``, ``_turns``) and ``check_view`` on
both the history and the view all read turns through it, so they cannot disagree again.
"""

from __future__ import annotations

__all__ = ["ActiveTurn", "Part", "TurnReader", "part_of"]

from dataclasses import dataclass
from typing import Literal

Part = Literal["lifted", "user", "result", "assistant", "calls"]
"""How a message takes part in the turns a provider reads: lifted out (a system message), a
user message without a result (a prompt, a hook reminder, a notice), one with a result, an
assistant message, one that makes calls."""

LIFTED_ROLES = frozenset({"system", "developer"})


def part_of(role: object, *, result: bool, calls: bool) -> Part:
    """The part a message with ``role`` plays; ``result``: it answers a call; ``calls``: it
    makes one. Every role but system, developer and assistant reaches the provider as a user
    turn."""
    if role in LIFTED_ROLES:
        return "lifted"
    if role == "assistant":
        return "calls" if calls else "assistant"
    return "result" if result else "user"


@dataclass(frozen=True, slots=True)
class ActiveTurn:
    """The turn the provider reads as the current one."""

    anchor: tuple[int, ...]
    """The messages of the last user turn that carries no tool result (empty: there is none,
    and the active turn opens the conversation)."""
    follows: int | None
    """The assistant message that user turn follows (``None``: it opens the conversation).
    Without it, the user turn would merge into the one before, which may carry results."""
    opener: int | None
    """The first assistant message after it: the one that must start with thinking (``None``:
    the conversation ends in that user turn, or has no assistant message after it)."""


class TurnReader:
    """Reads the turns of a message sequence as the provider merges them, message by message.

    Positions are whatever the caller numbers the messages it feeds (history positions, view
    indexes); a message that is not sent (an orphan result) is simply not fed.
    """

    __slots__ = ("_anchor", "_follows", "_group", "_last", "_opener", "_plain")

    def __init__(self) -> None:
        self._group: list[int] = []  # the user messages read since the last assistant one
        self._plain = True  # that user turn carries no result (and follows no call)
        self._last: int | None = None  # the last assistant message read
        self._anchor: tuple[int, ...] = ()
        self._follows: int | None = None
        self._opener: int | None = None

    def copy(self) -> TurnReader:
        twin = TurnReader()
        twin._group, twin._plain, twin._last = list(self._group), self._plain, self._last
        twin._anchor, twin._follows, twin._opener = self._anchor, self._follows, self._opener
        return twin

    @property
    def last_opener(self) -> int | None:
        """The opener of the latest turn read, even while a user turn without results follows
        it: whether that message carries thinking says whether thinking is on."""
        return self._opener

    @property
    def in_round(self) -> bool:
        """Whether a user message fed now merges into a tool round's user turn."""
        return not self._plain

    def feed(self, position: int, part: Part) -> None:
        if part == "lifted":
            return
        if part in ("user", "result"):
            self._group.append(position)
            self._plain = self._plain and part == "user"
            return
        if self._group:
            if self._plain:  # a user turn without results: the active turn starts after it
                self._anchor, self._follows = tuple(self._group), self._last
                self._opener = None
            self._group = []
        if self._opener is None:
            self._opener = position
        self._last = position
        # The user turn after a call carries its results (or, in a view, their placeholder).
        self._plain = part == "assistant"

    def active(self) -> ActiveTurn:
        if self._group and self._plain:
            return ActiveTurn(tuple(self._group), self._last, None)
        return ActiveTurn(self._anchor, self._follows, self._opener)
