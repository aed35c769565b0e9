"""Per-message facts, computed once per admitted message and reused by every request.

The canonical history is a plain list of dicts (``manager.messages``). Beside it we keep one
:class:`Facts` record per position: role, tool-call ids, human-prompt classification and the
token estimate. A request only computes facts for messages it has not seen before, so its cost
follows new work rather than the history's length.

Records are matched to messages by object identity. A subclass that re-reads its history from
disk hands us new, equal objects every time: those keep their records (compared by value);
only a message that really changed makes the index start over.

A row of Amplifier's public history kept for display only (``_public``) keeps its position,
so positions stay those of ``self.messages``, but its facts say nothing: it is never sent.
"""

from __future__ import annotations

__all__ = [
    "Estimator",
    "Facts",
    "HistoryIndex",
]

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..vocabulary._messages import (
    carries_loaded_tools,
    describe,
    has_image,
    has_thinking,
    is_human_prompt,
    validate_envelope,
)
from ..vocabulary._pairing import ToolPairing
from ..vocabulary._public import is_reference_only
from ._ids import IdAssigner
from ._plain import read_plain
from ._project import project
from ._turn_rule import TurnReader, part_of

Estimator = Callable[..., int]


@dataclass(slots=True)
class Facts:
    """What the request path needs to know about one history message."""

    message: Mapping[str, Any]
    """The history's message, as admitted (identity and equality checks use it)."""
    sent: Mapping[str, Any]
    """What the view sends for it (``_project``): the same object when nothing changes."""
    kinds: tuple[str, ...]
    """The projection's repair kinds (empty when ``sent is message``)."""
    role: str
    """The message's role ("" for a display-only row, which has none in any view)."""
    calls: tuple[str, ...]
    """The view ids of its calls (unique across the history, see ``_ids``)."""
    results: tuple[str, ...]
    """The view ids it answers."""
    human: bool
    tool_result: bool
    thinking: bool
    loaded_tools: bool
    image: bool
    tokens: int
    """The estimate of ``sent``: what is charged is what is sent."""
    display_only: bool = False
    """A row of Amplifier's public history kept for display only (``_public``): never sent, so
    it holds a position and nothing else: no role, ids, prompt or tokens."""

    @property
    def in_body(self) -> bool:
        """Rendered into the view's body: neither a system message (the view's head) nor a
        display-only row (never sent)."""
        return self.role != "system" and not self.display_only


class HistoryIndex:
    """Facts for every message of a history, kept in step with it incrementally.

    Tool-call pairing is maintained the same way: a forward pass that only looks at new
    messages, so knowing "which call does this result answer" costs nothing per request.
    """

    def __init__(self, estimator: Estimator, *, json_cap: int = 131_072) -> None:
        self._estimator = estimator
        self.estimator_calls = 0
        """How often the estimator ran (each message is meant to be estimated once)."""
        self._json_cap = json_cap
        """Largest unknown block sent as JSON text (the ingress cap)."""
        self._family: str | None = None
        self.facts: list[Facts] = []
        self._objects: list[Mapping[str, Any]] = []
        """``facts[i].message`` for every ``i``, as a plain list: the identity scan of a
        request compares it with the history at C speed."""
        self.generation = 0
        """Bumped whenever an already-indexed position changes (caches keyed on it drop)."""
        self._indexed_list: Sequence[Mapping[str, Any]] | None = None
        self.on_rewrite: Callable[[int], None] | None = None
        """Told the first position a sync found rewritten (the index has been rebuilt)."""
        self._reset_positions()

    def _reset_positions(self) -> None:
        self.pairing = ToolPairing()
        self._ids = IdAssigner()
        self.system_positions: list[int] = []
        # Positions by what the ladder looks for, ascending (each is a filter of ``facts``
        # kept as messages are appended, so an escalation need not walk the whole history).
        self.human_positions: list[int] = []
        self.tool_result_positions: list[int] = []
        self.loaded_tool_positions: list[int] = []
        self.display_only_positions: list[int] = []
        self.image_messages = 0
        self.turns = TurnReader()
        """The turns as the provider reads them (orphan results are never sent, so not read)."""

    def reset(self) -> None:
        self.facts = []
        self._objects = []
        self.generation += 1
        self._reset_positions()

    @property
    def family(self) -> str | None:
        return self._family

    def estimate(self, message: Mapping[str, Any]) -> int:
        self.estimator_calls += 1
        return self._estimator(message, family=self._family)

    def sync(self, messages: Sequence[Mapping[str, Any]], family: str | None) -> list[Facts]:
        """Bring the facts in line with ``messages``; returns the facts list."""
        changed = self.reconcile(messages, family)
        self.grow(messages, len(messages))
        if changed is not None and self.on_rewrite is not None:
            self.on_rewrite(changed)
        return self.facts

    def reconcile(self, messages: Sequence[Mapping[str, Any]], family: str | None) -> int | None:
        """Keep the facts that still describe ``messages``, indexing nothing new; returns the
        first rewritten position (the index then starts over) or None.

        A family change starts over too, without a rewrite: the messages are the same.
        """
        if family != self._family:
            self._family = family
            self.reset()
        changed = self._first_change(messages)
        if changed is not None:
            # Something already indexed changed: rebuild; the caller tells the decisions from
            # where on they describe messages that are no longer there (``on_rewrite``).
            self.reset()
        return changed

    def grow(self, messages: Sequence[Mapping[str, Any]], stop: int) -> None:
        """Index ``messages`` up to ``stop`` (a list ``reconcile`` has just accepted)."""
        for message in messages[len(self.facts) : stop]:
            fact = self._plain_facts(message)
            if fact is None:
                fact = self._facts_for(message, len(self.facts))
            self._append(fact)
        self._indexed_list = messages

    def _first_change(self, messages: Sequence[Mapping[str, Any]]) -> int | None:
        """The first indexed position that no longer holds the message it was indexed from
        (``None``: every one still does).

        Our own history only grows by appending to the same list: for that list a scan by
        identity (at C speed) is enough, and keeps a request O(new messages) in Python work.
        Any other list (a subclass that re-reads its file, ``set_messages``), or the same list
        with a message replaced in place, is compared position by position, by identity first
        and by value where the objects differ.
        """
        facts = self.facts
        objects = self._objects
        # One C-level list comparison: identical objects are passed by address, so our own
        # growing list costs a pointer comparison per message, not a Python call (a message
        # replaced in place by an equal copy reads the same to every provider and is kept).
        if messages is self._indexed_list and (
            objects == messages
            if len(objects) == len(messages)
            else len(objects) < len(messages) and objects == messages[: len(objects)]
        ):
            return None
        for position, (fact, message) in enumerate(zip(facts, messages, strict=False)):
            if fact.message is message:
                continue
            # A re-read copy of the same message keeps its facts (equality is a C-level
            # comparison, far cheaper than estimating again); anything else is a rewrite.
            if fact.message != message:
                return position
            if fact.sent is fact.message:
                fact.sent = message  # unchanged by projection: send the list's own object
            fact.message = self._objects[position] = message
        return None if len(facts) <= len(messages) else len(messages)

    def _append(self, fact: Facts) -> None:
        facts = self.facts
        index = len(facts)
        facts.append(fact)
        self._objects.append(fact.message)
        pairing = self.pairing
        late = pairing.late_answers
        pairing.add(fact.calls, fact.results)
        if pairing.late_answers != late:
            # A call that views already showed as interrupted just got its result: the
            # rendered prefix that holds its placeholder is out of date.
            self.generation += 1
        # What is not sent takes no part in the turns a provider reads: an orphan result, a
        # row kept for display only.
        if fact.display_only:
            self.display_only_positions.append(index)
            return
        role = fact.role
        if index not in pairing.orphans:
            self.turns.feed(index, part_of(role, result=fact.tool_result, calls=bool(fact.calls)))
        if role == "system":
            self.system_positions.append(index)
        if fact.human:
            self.human_positions.append(index)
        if fact.tool_result:
            self.tool_result_positions.append(index)
        if fact.loaded_tools:
            self.loaded_tool_positions.append(index)
        if fact.image:
            self.image_messages += 1

    def _plain_facts(self, message: Mapping[str, Any]) -> Facts | None:
        """The facts of a plain message (``_plain``: sent as itself, its ids kept), read in one
        pass; ``None`` when the general path (``_facts_for``) must decide."""
        plain = read_plain(message)
        if plain is None:
            return None
        role, calls, result, thinking, loaded_tools, human = plain
        if result is not None:
            if not self._ids.answers_as_sent(result):
                return None
            results: tuple[str, ...] = (result,)
        else:
            results = ()
            if calls and not self._ids.add_as_sent(calls):
                return None
        self.estimator_calls += 1
        tokens = self._estimator(message, family=self._family)
        # Positional: a keyword call of a 13-field dataclass costs more than the read above.
        return Facts(
            message, message, (), role, calls, results, human, bool(results), thinking,
            loaded_tools, False, tokens,
        )  # fmt: skip

    def _facts_for(self, message: Mapping[str, Any], position: int) -> Facts:
        validate_envelope(message, position)
        if is_reference_only(message):
            # Never sent: no ids are given out for it (the view's ids are those of what is
            # sent), and it counts for nothing a rule reads (see ``_protection.is_reminder``).
            return Facts(
                message=message,
                sent=message,
                kinds=(),
                role="",
                calls=(),
                results=(),
                human=False,
                tool_result=False,
                thinking=False,
                loaded_tools=False,
                image=False,
                tokens=0,
                display_only=True,
            )
        role = message.get("role")
        try:
            ids = self._ids.add(message, position)
            sent, kinds = project(message, ids, json_cap=self._json_cap)
        except ValueError as exc:  # a typed block whose model_dump() raises
            raise ValueError(f"{describe(message, position)}: {exc}") from exc
        return Facts(
            message=message,
            sent=sent,
            kinds=kinds,
            role=role if isinstance(role, str) else "",
            calls=ids.calls,
            results=ids.results,
            # Pairing reads what the ids say: a result without a usable id is still a result.
            human=not ids.results and is_human_prompt(message),
            tool_result=role == "tool" or bool(ids.results),
            thinking=has_thinking(message),
            loaded_tools=carries_loaded_tools(message),
            image=has_image(message),
            tokens=self.estimate(sent),
        )
