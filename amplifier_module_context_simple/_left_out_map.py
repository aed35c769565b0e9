"""The map of what a compacted view no longer shows: names without their bodies.

When an escalation leaves messages out or shortens tool results, the model loses the paths,
identifiers and ids those messages held, and with them the knowledge that the work was done.
The map keeps the names (``_names``) and drops the bodies, as a repo map lists a codebase's
symbols without their code: one line per call the lost content came from, newest first,

    - read_file src/app.py: AppConfig load_config DEFAULT_PORT

the tool and what it was called on, then the names its result held that the view no longer
shows. A prompt or an answer that was left out gets a line of its own (``user:``,
``assistant:``). A name the view still shows, or a newer line already lists, is not repeated.

The map is a function of the history and the decisions an escalation made (and the bound it
was made under), computed once at that escalation and kept in its statistics: requests between
escalations send the same bytes, and a resumed manager that re-plans the escalation at the same
point builds the same map. No model is called. It never exceeds its bound (a share of the
budget, ``compaction_map_share``): lines are added newest first while they fit.
"""

from __future__ import annotations

__all__ = [
    "MAP_HEADING",
    "LineReader",
    "MapLine",
    "NamesOf",
    "PassedNames",
    "build_map",
    "map_lines_of",
    "map_names",
]

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from ._calls import calls_made
from ._decisions import Decisions
from ._forms import text_of
from ._history import HistoryIndex
from ._messages import STUBBED_KEY, TRUNCATED_KEY
from ._names import name_forms, names_in

MAP_HEADING = "Left out, newest first (call or message: the names it held):"
"""The map's first line: what follows it are map lines (``map_lines_of`` reads them back)."""

_LINE = "- "
_READ_CHARS = 8_000
"""A message's names are read from its first this many characters: reading every left-out
message whole made a resume's walk (which re-makes every map) several times slower, for a
point or two of what stays findable (measured on the corpus at 16,000 and 32,000)."""
_ARGUMENT_CHARS = 400
"""An argument text longer than this is content (a file's body), not a name the call used."""
_SOURCE_CHARS = 80
"""A call's label keeps at most this many characters of what it was called on."""
_NAMES_PER_LINE = 9
"""A line lists at most this many names."""
_SEPARATOR = " "
"""Names are told apart by spaces (a comma would cost a token a name)."""
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_WALK_SLACK = 2
"""The walk stops once the lines it has gathered would take this many times the bound with
their calls and first few names each: older lines could not fit anyway."""


@dataclass(frozen=True, slots=True)
class MapLine:
    """One line of the map: where the content came from, and the names it held."""

    origin: int
    """The history position of the call (or message) the line is about: lines go newest
    first."""
    source: str
    """The call as ``tool what-it-was-called-on``, or ``user`` / ``assistant``."""
    names: tuple[str, ...]

    def text(self, names: int) -> str:
        """The line with its first ``names`` names (the telling ones come first)."""
        listed = _SEPARATOR.join(self.names[:names])
        return f"{_LINE}{self.source}: {listed}" if listed else f"{_LINE}{self.source}"


class NamesOf:
    """The names of a message's text, read once per history message.

    Keyed by the message's identity (the object kept beside it, so a reused id is never
    mistaken): a view sends most history messages as their very objects, and an escalation
    reads the names of the view and of what it leaves out. A shortened form is a new object
    each render and is read, not kept.
    """

    def __init__(self, index: HistoryIndex) -> None:
        self.index = index
        self._generation = index.generation
        self._known: dict[int, tuple[Mapping[str, Any], dict[str, None]]] = {}

    def __call__(self, message: Mapping[str, Any]) -> dict[str, None]:
        if self.index.generation != self._generation:
            self._generation, self._known = self.index.generation, {}
        known = self._known.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        names = names_in(text_of(message)[:_READ_CHARS])
        if not (message.get(TRUNCATED_KEY) or message.get(STUBBED_KEY)):
            self._known[id(message)] = (message, names)
        return names


def build_map(
    index: HistoryIndex,
    decisions: Decisions,
    *,
    shown: Iterable[Mapping[str, Any]],
    reader: LineReader,
    bound: int,
    measure: Callable[[str], int],
    passed: Set[str] = frozenset(),
) -> tuple[str, ...]:
    """The map's lines (the heading first; empty when nothing is left out or nothing fits).

    ``shown``: messages of the view whose names the map does not repeat (the notices of
    earlier escalations that still stand). ``reader``: what each message gives the map.
    ``bound``: the tokens the map may take, as ``measure`` counts a text. ``passed``: the
    names the history's calls passed, listed first.
    """
    if bound <= 0 or decisions.empty:
        return ()
    in_view: set[str] = set()
    for message in shown:
        in_view.update(reader.names_of(message))
    used = measure(MAP_HEADING)
    lines = _gather(index, decisions, in_view, bound * 4 * _WALK_SLACK, passed, reader)
    lines = _once(lines)
    # Every line's call first, newest first, while they fit; then names, a round at a time
    # (each line's first, then each line's second, ...), so one long listing never pushes
    # out an older line, and each line's most telling names come first.
    taken: list[int] = []
    for line in lines:
        cost = measure(line.text(0))
        if used + cost > bound:
            break
        taken.append(0)
        used += cost
    for round_ in range(_NAMES_PER_LINE):
        grew = False
        for i, line in enumerate(lines[: len(taken)]):
            if taken[i] != round_ or round_ >= len(line.names):
                continue
            cost = measure(_SEPARATOR + line.names[round_])
            if used + cost > bound:
                continue
            taken[i] += 1
            used += cost
            grew = True
        if not grew:
            break
    texts = [
        line.text(names)
        for line, names in zip(lines, taken, strict=False)
        # A bare tool or role that got no name tells the model nothing.
        if names or " " in line.source
    ]
    return (MAP_HEADING, *texts) if texts else ()


def _once(lines: list[MapLine]) -> list[MapLine]:
    """A call repeated with nothing new to name is said once, on its newest line."""
    said: set[str] = set()
    kept: list[MapLine] = []
    for line in lines:
        if line.names or line.source not in said:
            kept.append(line)
            said.add(line.source)
    return kept


_Key = tuple[int, str]
"""A line's key: the position of the call (or message) and the call's id (or the role)."""


_Entry = tuple[_Key, str, tuple[str, ...]]
"""What one left-out message gives a line: its key, the line's label and the names it held
(those its label says already left out)."""


class LineReader:
    """What each left-out message gives the map, read once per position.

    An escalation walks the positions the decisions leave out newest first; each gives the
    same entries at every escalation while the history holds (the generation), so they are
    read once: the names of the message (``NamesOf``), the label of the call it answers.
    """

    def __init__(self, index: HistoryIndex, names_of: NamesOf) -> None:
        self.index = index
        self.names_of = names_of
        self._generation = index.generation
        self._known: dict[tuple[int, bool], tuple[Mapping[str, Any], list[_Entry]]] = {}

    def entries(self, position: int, removed: bool) -> list[_Entry]:
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

    def _read(self, position: int, removed: bool) -> list[_Entry]:
        facts = self.index.facts
        fact = facts[position]
        message = fact.sent
        names = list(self.names_of(message))
        entries: list[_Entry] = []
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


def _entry(key: _Key, source: str, names: Iterable[str]) -> _Entry:
    # What the label already says (a path, or any of its endings) is not listed again.
    said = {form for name in names_in(source) for form in name_forms(name)}
    return key, source, tuple(n for n in dict.fromkeys(names) if n not in said)


def _gather(
    index: HistoryIndex,
    decisions: Decisions,
    shown: set[str],
    chars: int,
    passed: Set[str],
    reader: LineReader,
) -> list[MapLine]:
    """Lines for what ``decisions`` leave out or shorten, newest first, until ``chars``."""
    facts = index.facts

    def rank(name: str) -> tuple[bool, int]:
        # A name some call of the history passed first: an agent passes again what it or
        # a tool named before.
        return name not in passed, _telling(name)

    listed = set(shown)
    names_of: dict[_Key, list[str]] = {}
    source_of: dict[_Key, str] = {}
    gathered = 0
    for position in range(len(facts) - 1, -1, -1):
        removed = position in decisions.removed
        if not (removed or position in decisions.truncated or position in decisions.stubbed):
            continue
        if not facts[position].in_body:
            continue
        for key, source, names in reader.entries(position, removed):
            fresh = _fresh(names, listed)
            source_of.setdefault(key, source)
            names_of.setdefault(key, []).extend(fresh)
            # A line's call and its first few names are what the map can surely afford.
            gathered += len(source) + sum(len(n) + 2 for n in sorted(fresh, key=rank)[:3])
        if gathered > chars:
            break
    lines: list[MapLine] = []
    for key in sorted(names_of, reverse=True):
        source, names = source_of[key], sorted(names_of[key], key=rank)
        if names or " " in source:
            # A bare tool or role with no names would tell the model nothing.
            lines.append(MapLine(key[0], source, tuple(names)))
    return lines


def _telling(name: str) -> int:
    """Paths first, then file names, then the other identifiers: what an agent passes to its
    next call is most often a path (a stable sort keeps each kind in reading order)."""
    if "/" in name:
        return 0
    return 1 if _FILE_NAME.search(name) else 2


class PassedNames:
    """The names the calls of a history passed in their arguments, kept up with it."""

    def __init__(self, index: HistoryIndex) -> None:
        self.index = index
        self.names: set[str] = set()
        self._seen = 0
        self._generation = index.generation

    def current(self) -> Set[str]:
        """The names, the messages indexed since the last call read too."""
        index = self.index
        if index.generation != self._generation:
            self.names, self._seen, self._generation = set(), 0, index.generation
        facts = index.facts
        for fact in facts[self._seen :]:
            if fact.calls:
                for _, _, arguments in calls_made(fact.sent):
                    self.names.update(_argument_names(arguments))
        self._seen = len(facts)
        return self.names


def _fresh(names: Iterable[str], listed: set[str]) -> list[str]:
    """Of ``names``, those neither shown nor listed yet (now listed)."""
    fresh = [n for n in dict.fromkeys(names) if n not in listed]
    listed.update(fresh)
    return fresh


def _result_line(
    position: int,
    owner: int | None,
    call_message: Mapping[str, Any] | None,
    answers: Sequence[str],
) -> tuple[_Key, str]:
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


def map_lines_of(text: str) -> list[str]:
    """The map lines a notice's text holds (none when it has no map)."""
    _, found, rest = text.partition(MAP_HEADING)
    if not found:
        return []
    lines: list[str] = []
    for line in rest.split("\n"):
        if line.startswith(_LINE):
            lines.append(line)
        elif line.strip():
            break
    return lines


def map_names(line: str) -> dict[str, None]:
    """The names a map line shows (its call's and those it lists)."""
    return names_in(line)
