"""What each left-out message gives the map of what a view left out (``_left_out_map``).

A line of the map is a call (the tool and what it was called on) or a message (its role),
and the names its messages held. Reading them costs a pass over each message's text, so it is
done once per message and kept while the history holds: ``LineReader`` the entries a left-out
position gives (``message_names``: the names of a message), ``PassedNames`` the names the history's
calls passed (a map lists those first).
"""

from __future__ import annotations

__all__ = ["RECENT_CALLS", "Entry", "Key", "LineReader", "PassedNames", "message_names"]

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..history._history import HistoryIndex
from ..vocabulary._calls import calls_made
from ..vocabulary._names import name_forms, names_in
from ._forms import text_of

_READ_CHARS = 4_000
"""A message's names are read from this many of its characters (three quarters from its
head, a quarter from its tail). On the corpus at 8,000, 16,000 and 32,000 tokens this keeps
as many names findable as reading 8,000 characters did, and reading every message whole
gained a point or two for a first escalation several times slower."""
_ARGUMENT_CHARS = 400
"""An argument text longer than this is content (a file's body), not a name the call used."""
RECENT_CALLS = 256
"""A map lists first the names the last this many call messages passed: an agent passes
again what it passed lately, and reading every call of a long session for each map made a
resume's first escalation slower than the rest of it (every corpus session has fewer)."""
_SOURCE_CHARS = 80
"""A call's label keeps at most this many characters of what it was called on."""


def message_names(message: Mapping[str, Any]) -> dict[str, None]:
    """The names of a message's text, from its head and its tail when it is long."""
    text = text_of(message)
    if len(text) > _READ_CHARS:
        # The head and the tail: a tool says what it did first, and what it found last.
        text = text[: _READ_CHARS * 3 // 4] + "\n" + text[-_READ_CHARS // 4 :]
    return names_in(text)


Key = tuple[int, str]
"""A line's key: the position of the call (or message) and the call's id (or the role)."""


Entry = tuple[Key, str, tuple[str, ...]]
"""What one left-out message gives a line: its key, the line's label and the names it held
(those its label says already left out)."""


class LineReader:
    """What each left-out message gives the map, read once per position.

    An escalation walks the positions the decisions leave out newest first; each gives the
    same entries at every escalation while the history holds (the generation), so they are
    read once: the names of the message (``message_names``), the label of the call it answers.
    """

    def __init__(self, index: HistoryIndex) -> None:
        self.index = index
        self._generation = index.generation
        self._known: dict[tuple[int, bool], tuple[Mapping[str, Any], list[Entry]]] = {}

    def entries(self, position: int, removed: bool) -> list[Entry]:
        """The entries of the message at ``position`` (``removed``: left out, not shortened:
        a call message left out names its calls too)."""
        index = self.index
        if index.generation != self._generation:
            self._generation, self._known = index.generation, {}
        fact = index.facts[position]
        known = self._known.get((position, removed))
        if known is not None and known[0] is fact.sent:
            return known[1]
        read = self._read(position, removed)
        self._known[(position, removed)] = (fact.sent, read)
        return read

    def _read(self, position: int, removed: bool) -> list[Entry]:
        facts = self.index.facts
        fact = facts[position]
        message = fact.sent
        names = list(message_names(message))
        entries: list[Entry] = []
        if fact.tool_result:
            owner = self.index.pairing.owner_of.get(position)
            key, source = _result_line(
                position, owner, None if owner is None else facts[owner].sent, fact.results
            )
        elif fact.calls and removed:
            # A call message: a line per call, its arguments' names on it; what the message
            # says beside its calls goes on the first call's line.
            key, source = (position, fact.role), "assistant"
            for call_id, tool, arguments in reversed(calls_made(message)):
                key, source = (position, call_id), _call_label(tool, arguments)
                entries.append(_entry(key, source, _argument_names(arguments)))
        else:
            key, source = (position, fact.role), fact.role
        # The message's own names go first: it is read before its calls' arguments.
        entries.insert(0, _entry(key, source, names))
        return entries


def _entry(key: Key, source: str, names: Iterable[str]) -> Entry:
    # What the label already says (a path, or any of its endings) is not listed again.
    said = {form for name in names_in(source) for form in name_forms(name)}
    return key, source, tuple(n for n in dict.fromkeys(names) if n not in said)


class PassedNames:
    """The names the latest calls of a history passed in their arguments (a map lists them
    first): those of the last ``RECENT_CALLS`` call messages before a position, each call
    message read once while the history holds."""

    def __init__(self, index: HistoryIndex) -> None:
        self.index = index
        self._generation = index.generation
        self._known: dict[int, tuple[Mapping[str, Any], tuple[str, ...]]] = {}

    def passed_before(self, length: int) -> Callable[[str], bool]:
        """Whether one of the last call messages among the history's first ``length``
        passed a name (the history as it was when a map was ordered)."""
        index = self.index
        if index.generation != self._generation:
            self._generation, self._known = index.generation, {}
        facts = index.facts
        names: set[str] = set()
        calls = 0
        for position in range(min(length, len(facts)) - 1, -1, -1):
            fact = facts[position]
            if not fact.calls:
                continue
            known = self._known.get(position)
            if known is None or known[0] is not fact.sent:
                passed = [n for _, _, a in calls_made(fact.sent) for n in _argument_names(a)]
                known = self._known[position] = (fact.sent, tuple(passed))
            names.update(known[1])
            calls += 1
            if calls == RECENT_CALLS:
                break
        return names.__contains__


def _result_line(
    position: int,
    owner: int | None,
    call_message: Mapping[str, Any] | None,
    answers: Sequence[str],
) -> tuple[Key, str]:
    """A result's line: keyed by the call that produced it, labelled with its tool and what
    it was called on (the same line as the call's own, when the call is left out too)."""
    if owner is None or call_message is None:
        return (position, "result"), "tool result"
    calls = calls_made(call_message)
    for call_id, tool, arguments in calls:
        if call_id in answers:
            return (owner, call_id), _call_label(tool, arguments)
    if calls:
        return (owner, calls[0][0]), _call_label(calls[0][1], calls[0][2])
    return (owner, "result"), "tool result"


def _call_label(tool: str, arguments: object) -> str:
    """``tool what-it-was-called-on`` (``_first_text``), on one line."""
    about = _first_text(arguments)
    if about is None:
        return tool
    line = " ".join(about.split())
    if len(line) > _SOURCE_CHARS:
        line = line[: _SOURCE_CHARS - 1] + "…"
    return f"{tool} {line}"


def _first_text(arguments: object) -> str | None:
    """What a call was about: its first text argument that holds a name (a path, a command
    on one), else its first text argument (``view`` before the path it views is not it)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments or None
    if not isinstance(arguments, Mapping):
        return None
    texts = [
        value
        for value in arguments.values()  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, str) and value.strip()
    ]
    return next((t for t in texts if names_in(t)), texts[0] if texts else None)


def _argument_names(arguments: object) -> list[str]:
    """The names in the short texts of a call's arguments (nested values included): paths,
    commands, patterns; not a file's body that a write passes (read where it is shown)."""
    found: list[str] = []
    stack: list[object] = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if len(value) <= _ARGUMENT_CHARS:
                found.extend(names_in(value))
        elif isinstance(value, Mapping):
            stack.extend(reversed(list(value.values())))  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(value, list):
            stack.extend(reversed(value))  # pyright: ignore[reportUnknownArgumentType]
    return found
