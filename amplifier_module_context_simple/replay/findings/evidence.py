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
* **lost**: the rest, by name.

A salient string is a run of letters, digits and ``_ . / -`` (ends trimmed of ``. / -``), at
least four characters long, with a letter, that holds a ``/``, a ``.`` or a ``_`` or is
camelCase: ``src/app.py``, ``test_budget``, ``ContextConfig``, ``v1.2``; not ``pytest``,
``e.g`` or ``0.5``. A string the call used is met by itself or by one of its path endings
(:func:`forms`): a call's ``/repo/src/app.py`` (``repo/src/app.py``) is met by ``src/app.py``
or ``app.py`` in a result, as tools print paths shorter than agents pass them; it counts once.

Cost: each history message's strings are read once, when it joins the history; a view costs
the messages it holds past what it shares with the previous view (as the drop tracker).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._render import text_of
from .drops import calls_made, is_notice

__all__ = [
    "CompactionEvidence",
    "EvidenceRecord",
    "EvidenceTracker",
    "by_compaction",
    "forms",
    "kept_share",
    "salient_strings",
    "used_strings",
]

_MIN_CHARS = 4
_EVIDENCE_ROLES = frozenset({"tool", "user"})
_RUN = re.compile(rf"[A-Za-z0-9_./\-]{{{_MIN_CHARS},}}")
_MARKED = re.compile(r"[/._]|[a-z][A-Z]")
_LETTER = re.compile(r"[A-Za-z]")


def salient_strings(text: str) -> set[str]:
    """The salient strings of ``text`` (see the module docstring)."""
    found: set[str] = set()
    # Each distinct run is judged once: a tool result repeats most of its words.
    for run in set(_RUN.findall(text)):
        if not _MARKED.search(run):
            continue
        word = run.strip("./-")
        if len(word) >= _MIN_CHARS and _LETTER.search(word) and _MARKED.search(word):
            found.add(word)
    return found


def forms(string: str) -> set[str]:
    """``string`` and each of its path endings that is salient itself: ``p/src/app.py`` ->
    ``p/src/app.py``, ``src/app.py``, ``app.py``."""
    found = {string}
    parts = string.split("/")
    for start in range(1, len(parts)):
        ending = "/".join(parts[start:])
        if ending in salient_strings(ending):
            found.add(ending)
    return found


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


def kept_share(records: Sequence[EvidenceRecord]) -> float | None:
    """Kept over used, summed over ``records``; ``None`` when nothing was used."""
    used = sum(r.used for r in records)
    return round(sum(r.kept for r in records) / used, 4) if used else None


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
        record = EvidenceRecord(request, len(used), len(used) - len(lost), lost, left_at)
        self.records.append(record)
        return record

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
