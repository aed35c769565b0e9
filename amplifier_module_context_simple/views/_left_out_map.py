"""The map of what a compacted view no longer shows: names without their bodies.

When an escalation leaves messages out or shortens tool results, the model loses the paths,
identifiers and ids those messages held, and with them the knowledge that the work was done.
The map keeps the names (``_names``) and drops the bodies, as a repo map lists a codebase's
symbols without their code: one line per call the lost content came from, newest first,

    - read_file src/app.py: AppConfig load_config DEFAULT_PORT

the tool and what it was called on, then the names its messages held. A prompt or an answer
that was left out gets a line of its own (``user:``, ``assistant:``). A name a newer line, the
line's own label or a notice still standing already says is not repeated (the view itself is
not read for names: that cost a pass over the whole view at every escalation). What each
message gives the map is read once (``_map_reading``).

The map is a function of the history and the decisions an escalation made (and the bound it
was made under), computed once at that escalation and kept in its statistics: requests between
escalations send the same bytes, and a resumed manager that re-plans the escalation at the same
point builds the same map. No model is called. It never exceeds its bound (a share of the
budget, ``compaction_map_share``): lines are added newest first while they fit.
"""

from __future__ import annotations

__all__ = ["MAP_HEADING", "MapLine", "build_map", "map_lines_of"]

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..history._history import HistoryIndex
from ._decisions import Decisions
from ._map_reading import Key, LineReader, message_names

MAP_HEADING = "Left out, newest first (call or message: the names it held):"
"""The map's first line: what follows it are map lines (``map_lines_of`` reads them back)."""

_LINE = "- "
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


def build_map(
    index: HistoryIndex,
    decisions: Decisions,
    *,
    shown: Iterable[Mapping[str, Any]],
    reader: LineReader,
    bound: int,
    measure: Callable[[str], int],
    length: int,
    passed: Callable[[str], bool] = lambda _: False,
) -> tuple[str, ...]:
    """The map's lines (the heading first; empty when nothing is left out or nothing fits).

    ``shown``: messages of the view whose names the map does not repeat (the notices of
    earlier escalations that still stand). ``reader``: what each message gives the map.
    ``bound``: the tokens the map may take, as ``measure`` counts a text. ``length``: the
    history's length the decisions were made at. ``passed``: whether one of those messages'
    calls passed a name (listed first).
    """
    if bound <= 0 or decisions.empty:
        return ()
    in_view: set[str] = set()
    for message in shown:
        in_view.update(message_names(message))
    used = measure(MAP_HEADING)
    lines = _gather(index, decisions, in_view, bound * 4 * _WALK_SLACK, (length, passed), reader)
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


def _gather(
    index: HistoryIndex,
    decisions: Decisions,
    shown: set[str],
    chars: int,
    history: tuple[int, Callable[[str], bool]],
    reader: LineReader,
) -> list[MapLine]:
    """Lines for what ``decisions`` leave out or shorten, newest first, until ``chars``
    (``history``: its length then, and whether its calls passed a name)."""
    facts = index.facts
    length, passed = history

    def rank(name: str) -> tuple[bool, int]:
        # A name some call of the history passed first: an agent passes again what it or
        # a tool named before.
        return not passed(name), _telling(name)

    listed = set(shown)
    names_of: dict[Key, list[str]] = {}
    source_of: dict[Key, str] = {}
    gathered = 0
    for position in range(length - 1, -1, -1):
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
            gathered += len(source) + sum(len(n) + 2 for n in fresh[:3])
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


def _fresh(names: Iterable[str], listed: set[str]) -> list[str]:
    """Of ``names``, those neither shown nor listed yet (now listed)."""
    fresh = [n for n in dict.fromkeys(names) if n not in listed]
    listed.update(fresh)
    return fresh


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
