"""Evidence kept: of what the agent went on to use, how much its view still showed.

Each replayed request is followed, in the recording, by the assistant message the model
answered with. Its tool calls name what the agent was working with (a path, a command's file,
an identifier), and those names came from somewhere: from earlier tool results and user
messages. A view that left those messages out made the agent work from memory, or redo the
work; that is what compaction costs beyond the tokens, and what this module measures.

For request N:

* **used**: the salient strings (:func:`salient_strings`) of the arguments of every call the
  recorded next assistant message makes that some earlier tool result or user message of the
  history contained (a string the agent made up, or took from its own earlier words, is not
  evidence the view could have kept);
* **kept**: those of them that a tool result or user message of request N's view still shows
  (whole, or in what remains of a shortened result or a stubbed message; the compaction
  notice, the system prompt and assistant messages do not count);
* **lost**: the rest, by name;
* **findable**: the kept ones and the lost ones a line of the notice's map of what the view
  left out (``_left_out_map``) names, itself or by a path ending: the model can find those
  again. *Kept* is what the views hold *in context*.

A salient string (the runtime's *name*, ``_names``) is a run of letters, digits and
``_ . / -`` (ends trimmed of ``. / -``), at least four characters long, with a letter, that
holds a ``/``, a ``.`` or a ``_`` or is camelCase: ``src/app.py``, ``test_budget``,
``ContextConfig``, ``v1.2``; not ``pytest``, ``e.g`` or ``0.5``. A string the call used is
met by itself or by one of its path endings (:func:`forms`): a call's ``/repo/src/app.py``
(``repo/src/app.py``) is met by ``src/app.py`` or ``app.py`` in a result, as tools print paths
shorter than agents pass them; it counts once.

Cost: each history message's strings are read once, when it joins the history; a view costs
the messages it holds past what it shares with the previous view (as the drop tracker).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...views._left_out_map import map_lines_of
from ...views._render import text_of
from ...vocabulary._names import name_forms, names_in
from .drops import calls_made, is_notice

__all__ = [
    "CompactionEvidence",
    "EvidenceRecord",
    "EvidenceTracker",
    "MapFinding",
    "by_compaction",
    "findable_share",
    "forms",
    "kept_share",
    "map_findings",
    "salient_strings",
    "used_strings",
]

_EVIDENCE_ROLES = frozenset({"tool", "user"})


def salient_strings(text: str) -> set[str]:
    """The salient strings of ``text``: the runtime's names (``_names``), one definition for
    the map of what a view left out and for this measure."""
    return set(names_in(text))


def forms(string: str) -> set[str]:
    """``string`` and each of its path endings that is salient itself: ``p/src/app.py`` ->
    ``p/src/app.py``, ``src/app.py``, ``app.py``."""
    return name_forms(string)


def _argument_texts(value: object) -> Iterable[str]:
    """Every string inside a call's arguments (nested objects and arrays included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():  # type: ignore[misc]
            yield from _argument_texts(item)
    elif isinstance(value, list):
        for item in value:  # type: ignore[misc]
            yield from _argument_texts(item)


def used_strings(message: Mapping[str, Any]) -> set[str]:
    """The salient strings of the arguments of every call ``message`` makes."""
    found: set[str] = set()
    for _, _, arguments in calls_made(message):
        for text in _argument_texts(arguments):
            found |= salient_strings(text)
    return found


def _shown(message: Mapping[str, Any]) -> frozenset[str]:
    """What a message offers as evidence: a tool result's or a user message's strings."""
    if message.get("role") not in _EVIDENCE_ROLES or is_notice(message):
        return frozenset()
    return frozenset(salient_strings(text_of(message)))


@dataclass(frozen=True)
class MapFinding:
    """A string the agent used that a view no longer showed, found in its map instead."""

    request: int
    string: str
    line: str
    """The map line that named it."""


@dataclass(frozen=True)
class EvidenceRecord:
    """One request: what the next assistant message used and what the view still showed."""

    request: int
    used: int
    """Salient strings the next message's calls used that earlier tool results or user
    messages contained."""
    kept: int
    """Of those, the ones a tool result or user message of the view still shows."""
    lost: list[str]
    """The others, sorted."""
    left_at: list[int]
    """For each of ``lost``, the request whose view stopped showing it (or, never shown, the
    request its message joined the history at)."""
    found_in_map: list[MapFinding] = field(default_factory=list[MapFinding])
    """Of ``lost``, those a line of the notice's map of what was left out names, each with
    that line: not shown, but findable again."""

    @property
    def findable(self) -> int:
        """Used strings the view shows, or names in its map of what it left out."""
        return self.kept + len(self.found_in_map)


def kept_share(records: Sequence[EvidenceRecord]) -> float | None:
    """Kept over used (*in context*), summed over ``records``; ``None`` when nothing was
    used."""
    used = sum(r.used for r in records)
    return round(sum(r.kept for r in records) / used, 4) if used else None


def findable_share(records: Sequence[EvidenceRecord]) -> float | None:
    """Findable over used (in context, or named by the map), summed over ``records``."""
    used = sum(r.used for r in records)
    return round(sum(r.findable for r in records) / used, 4) if used else None


@dataclass
class EvidenceTracker:
    """Follows a replay's history and views; :meth:`observe` is one request's record."""

    records: list[EvidenceRecord] = field(default_factory=list[EvidenceRecord])
    _seen: set[str] = field(default_factory=set[str])
    """Every salient string of the history's tool results and user messages so far."""
    _by_id: dict[int, tuple[Mapping[str, Any], frozenset[str]]] = field(
        default_factory=dict[int, tuple[Mapping[str, Any], frozenset[str]]]
    )
    """``id`` -> (the message, its strings), for each history message: the object is kept
    beside its id (the history keeps it alive anyway), so a reused id is never mistaken."""
    _indexed: int = 0
    _view: list[frozenset[str]] = field(default_factory=list[frozenset[str]])
    _shown: Counter[str] = field(default_factory=Counter[str])
    """How many of the current view's messages show each string."""
    _maps: dict[int, tuple[Mapping[str, Any], list[tuple[str, set[str]]]]] = field(
        default_factory=dict[int, tuple[Mapping[str, Any], list[tuple[str, set[str]]]]]
    )
    """``id`` -> (a notice, its map lines with their names)."""
    _left: dict[str, int] = field(default_factory=dict[str, int])
    """String -> the request whose view last stopped showing it (or that first saw it)."""

    def observe(
        self,
        request: int,
        view: Sequence[Mapping[str, Any]],
        history: Sequence[Mapping[str, Any]],
        upcoming: Mapping[str, Any],
        *,
        shared: int,
    ) -> EvidenceRecord:
        """Request ``request``'s record: ``view`` was sent for ``history``, and the recording
        answered it with ``upcoming``. ``shared``: the head of ``view`` that is the previous
        view's very messages (``shared_start``)."""
        for message in history[self._indexed :]:
            strings = _shown(message)
            for string in strings - self._seen:
                self._left[string] = request
            self._seen |= strings
            self._by_id[id(message)] = (message, strings)
        self._indexed = len(history)
        gone: set[str] = set()
        for strings in self._view[shared:]:
            self._shown.subtract(strings)
            gone |= strings
        tail = [self._strings(m) for m in view[shared:]]
        for strings in tail:
            self._shown.update(strings)
        self._view[shared:] = tail
        for string in gone:
            if self._shown[string] <= 0:
                self._left[string] = request
        # Each used string with the forms of it the history held; none held: not evidence.
        held = {s: forms(s) & self._seen for s in used_strings(upcoming)}
        used = {s: met for s, met in held.items() if met}
        lost = sorted(s for s, met in used.items() if all(self._shown[f] <= 0 for f in met))
        # Left when the last of its forms the history held left (or joined it unshown).
        left_at = [max(self._left[f] for f in used[s]) for s in lost]
        found = self._found_in_map(request, view, {s: used[s] for s in lost}) if lost else []
        record = EvidenceRecord(request, len(used), len(used) - len(lost), lost, left_at, found)
        self.records.append(record)
        return record

    def _found_in_map(
        self, request: int, view: Sequence[Mapping[str, Any]], lost: Mapping[str, set[str]]
    ) -> list[MapFinding]:
        """Of the ``lost`` strings (each with the forms the history held), those a map line of
        the view's notice names, itself or by a path ending (string -> the line)."""
        lines: dict[str, str] = {}
        for message in view:
            if is_notice(message):
                for line, names in self._map_of(message):
                    for name in names:
                        lines.setdefault(name, line)
        found: list[MapFinding] = []
        for string, held in lost.items():
            line = next((lines[f] for f in sorted(held) if f in lines), None)
            if line is not None:
                found.append(MapFinding(request, string, line))
        return found

    def _map_of(self, notice: Mapping[str, Any]) -> list[tuple[str, set[str]]]:
        """A notice's map lines, each with the names it shows and their path endings (read
        once per notice: it stays the same object while it reads the same)."""
        known = self._maps.get(id(notice))
        if known is not None and known[0] is notice:
            return known[1]
        parsed: list[tuple[str, set[str]]] = []
        for line in map_lines_of(text_of(notice)):
            names: set[str] = set()
            for name in names_in(line):
                names |= forms(name)
            parsed.append((line, names))
        self._maps[id(notice)] = (notice, parsed)
        return parsed

    def _strings(self, message: Mapping[str, Any]) -> frozenset[str]:
        known = self._by_id.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        return _shown(message)  # a shortened or stubbed copy, or a projected form


@dataclass(frozen=True)
class CompactionEvidence:
    """What one compaction left out that the agent then used."""

    compaction: int
    """1-based, as in ``compactions``."""
    request: int
    """The request that compacted."""
    lost_uses: int
    """Strings later requests' next messages used that left the view at this compaction
    (counted once per request that used one)."""
    first_loss_request: int | None
    """The first such request; ``None``: none."""
    first_loss: list[str]
    """What it used that this compaction had left out."""


def by_compaction(
    records: Sequence[EvidenceRecord], compaction_requests: Sequence[int]
) -> list[CompactionEvidence]:
    """Per compaction (the request of each, in order): each lost string goes to the latest
    compaction at or before the request its view stopped showing it (a string that left with
    no compaction before it, by a pairing repair, goes to none)."""
    uses: list[dict[int, list[str]]] = [{} for _ in compaction_requests]
    for record in records:
        for string, left in zip(record.lost, record.left_at, strict=True):
            at = bisect_right(compaction_requests, left) - 1
            if at >= 0:
                uses[at].setdefault(record.request, []).append(string)
    found: list[CompactionEvidence] = []
    for number, (request, used) in enumerate(zip(compaction_requests, uses, strict=True), 1):
        first = min(used, default=None)
        found.append(
            CompactionEvidence(
                compaction=number, request=request,
                lost_uses=sum(len(strings) for strings in used.values()),
                first_loss_request=first,
                first_loss=[] if first is None else used[first],
            )
        )  # fmt: skip
    return found


def map_findings(message: Mapping[str, Any], records: Sequence[EvidenceRecord]) -> list[MapFinding]:
    """For one history message: each request whose next call used a string this message held
    that the view no longer showed, and the map line that kept it findable."""
    held = salient_strings(text_of(message))
    return [f for r in records for f in r.found_in_map if forms(f.string) & held]
