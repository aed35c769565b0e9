"""Rendering a view from the history and the decisions in force.

Everything here is deterministic: no clocks, no budget-dependent lengths. Every message is
rendered from its sent form (``Facts.sent``, the host-valid projection of ``_project``), which
is the history's very own dict whenever nothing had to change; only a message the view has to
change (projected, truncated, stubbed) becomes a new dict, and the history's dict is never
touched. The shortened forms themselves are ``_forms``'s, re-exported here with the notice.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from ..history._history import Facts, HistoryIndex
from ..history._project import ORPHAN_DROPPED, PLACEHOLDER_ADDED, STRAY_DROPPED
from ..vocabulary._messages import RESULT_BLOCK_TYPES, block_dict
from ._decisions import CompactionStats, Decisions
from ._forms import (
    PLACEHOLDER_RESULT,
    STUB_HEAD_CHARS,
    STUB_TEMPLATE,
    TRUNCATION_MARKER,
    ShortForms,
    can_truncate,
    placeholder,
    stubbed,
    text_of,
    truncated,
)
from ._notice import NOTICE_SOURCE, NoticeFigures, notice, notice_figures, notice_message

# Exports the view's renderers (truncate, stub, placeholder, notice) and their texts.
__all__ = [
    "FACTORY_SOURCE",
    "NOTICE_SOURCE",
    "PLACEHOLDER_RESULT",
    "STUB_HEAD_CHARS",
    "STUB_TEMPLATE",
    "TRUNCATION_MARKER",
    "Message",
    "NoticeFigures",
    "RenderResult",
    "ShortForms",
    "can_truncate",
    "factory_message",
    "factory_replaces",
    "is_factory_message",
    "notice",
    "notice_boundary",
    "notice_figures",
    "notice_message",
    "open_tail_call",
    "placeholder",
    "render_range",
    "stubbed",
    "system_part",
    "text_of",
    "truncated",
    "without_results",
]

FACTORY_SOURCE = "system-prompt-factory"
"""``metadata.source`` of the system message a system prompt factory's text becomes."""

Message = dict[str, Any]


def without_results(message: Mapping[str, Any], ids: set[str], owned: tuple[str, ...]) -> Message:
    """A copy without the ``tool_result`` blocks that answer ``ids``.

    A ``tool_call_id`` among ``ids`` is pointed at the call the message really answers
    (``owned``, the ids its blocks answer for its call), so the provider sees one pairing.
    """
    kept = [
        b
        for b in message.get("content") or []
        if not (
            (data := block_dict(b)) is not None
            and data.get("type") in RESULT_BLOCK_TYPES
            and (data.get("tool_use_id") or data.get("tool_call_id")) in ids
        )
    ]
    copy: Message = {**message, "content": kept}
    if copy.get("tool_call_id") in ids and owned:
        copy["tool_call_id"] = owned[0]
    return copy


class RenderResult:
    """A rendered stretch of history: the messages, their token total and what was repaired."""

    __slots__ = ("messages", "rendered", "repaired", "tokens")

    def __init__(self) -> None:
        self.messages: list[Mapping[str, Any]] = []
        self.tokens = 0
        self.repaired: list[str] = []
        self.rendered = 0
        """How many history messages were rendered into it (placeholders not counted)."""


def render_range(
    index: HistoryIndex,
    decisions: Decisions,
    start: int,
    stop: int,
    *,
    open_tail: int | None,
    keep_chars: int,
    forms: ShortForms | None = None,
) -> RenderResult:
    """Render the non-system positions ``start <= i < stop`` under ``decisions``.

    Each tool result is emitted right after its call (so a history that a cancelled run left
    out of order still gives a valid view); a result whose call is unknown is left out, and a
    call that never got an answer gets a placeholder result, except the ``open_tail`` call the
    orchestrator is still executing. ``forms``: the estimates of shortened forms known so far
    (the caller's cache; without one each form is estimated here).
    """
    out = RenderResult()
    facts, pairing, removed = index.facts, index.pairing, decisions.removed
    owner_of, orphans, results_of = pairing.owner_of, pairing.orphans, pairing.results_of
    shortened = decisions.truncated or decisions.stubbed
    if forms is None:
        forms = ShortForms(index)
    messages, repaired = out.messages, out.repaired
    tokens = rendered = 0
    # A whole history after a compaction is mostly left out: only what is shown is walked.
    # Each message is emitted inline (a render walks every new message of every request).
    for position in decisions.shown(start, stop):
        fact = facts[position]
        if not fact.in_body:
            continue  # systems lead the view; a display-only row is never sent
        if position in owner_of:
            continue  # emitted together with its call
        if position in orphans:
            repaired.append(
                f"{ORPHAN_DROPPED}: dropped result at position {position}: its call is unknown"
            )
            continue
        if shortened:
            message, cost = _form(forms, decisions, position, fact, keep_chars)
        else:
            message, cost = fact.sent, fact.tokens
        messages.append(message)
        tokens += cost
        rendered += 1
        if fact.kinds:
            repaired.extend(f"{kind}: message at position {position}" for kind in fact.kinds)
        if not fact.calls:
            continue
        for result in results_of.get(position, ()):
            if result in removed:
                continue
            answer = facts[result]
            if shortened:
                message, cost = _form(forms, decisions, result, answer, keep_chars)
            else:
                message, cost = answer.sent, answer.tokens
            owned, answered = pairing.answers[result], answer.results
            stray = set(answered).difference(owned) if answered != owned else None
            messages.append(without_results(message, stray, owned) if stray else message)
            tokens += cost
            rendered += 1
            if answer.kinds:
                repaired.extend(f"{kind}: message at position {result}" for kind in answer.kinds)
            if stray:
                repaired.append(
                    f"{STRAY_DROPPED}: dropped result(s) {sorted(stray)} at position "
                    f"{result}: they do not answer a call that is waiting for them"
                )
        missing = pairing.missing(position)
        if missing and position != open_tail:
            for call_id in sorted(missing):
                filler, cost = forms.placeholder(call_id)
                messages.append(filler)
                tokens += cost
                repaired.append(
                    f"{PLACEHOLDER_ADDED}: added a placeholder result for call {call_id!r}"
                )
    out.tokens, out.rendered = tokens, rendered
    return out


def _form(
    forms: ShortForms, decisions: Decisions, position: int, fact: Facts, keep_chars: int
) -> tuple[Mapping[str, Any], int]:
    """How the message at ``position`` is shown under ``decisions``, and its estimate."""
    if position in decisions.truncated:
        return forms.truncated(position, decisions.truncated[position], keep_chars)
    if position in decisions.stubbed:
        return forms.stubbed(position)
    return fact.sent, fact.tokens


def notice_boundary(decisions: Decisions, latest: CompactionStats | None, history_size: int) -> int:
    """The history position the in-place notice stands before: the first position the latest
    escalation reduced (everything from there on was rewritten by it anyway), else the first
    reduced one, else the history's end. Rendering up to it passes whole rounds only: a call
    is rendered with every result it has kept, wherever those stand, and a removed group
    leaves as a unit."""
    if latest is not None:
        reduced = (
            p
            for p in itertools.chain(
                latest.removed_positions, latest.truncated_positions, latest.stubbed_positions
            )
            if p in decisions.removed or p in decisions.truncated or p in decisions.stubbed
        )
        first = min(reduced, default=None)
        if first is not None:
            return first
    return min(
        itertools.chain(decisions.removed, decisions.truncated, decisions.stubbed),
        default=history_size,
    )


def open_tail_call(index: HistoryIndex) -> int | None:
    """The trailing call still awaiting results, if the history ends on one."""
    facts = index.facts
    position = len(facts) - 1
    while position >= 0 and (not facts[position].in_body or position in index.pairing.owner_of):
        position -= 1
    if position >= 0 and facts[position].calls and index.pairing.missing(position):
        return position
    return None


def system_part(
    facts: Sequence[Facts], factory_message: Mapping[str, Any] | None
) -> list[Mapping[str, Any]]:
    """The view's leading system messages.

    With a system prompt factory its message replaces the stored static system messages, while
    system messages a hook injected stay.
    """
    stored = [f.sent for f in facts if f.role == "system"]
    if factory_message is None:
        return stored
    return [factory_message, *(m for m in stored if not factory_replaces(m))]


def factory_message(text: str) -> Message:
    """The system message a system prompt factory's ``text`` becomes.

    It says where it comes from, so ``check_view`` can tell it from a changed system message:
    it stands for the static system messages it replaces (``factory_replaces``).
    """
    return {"role": "system", "content": text, "metadata": {"source": FACTORY_SOURCE}}


def is_factory_message(message: Mapping[str, Any]) -> bool:
    """Whether a (system) message is the one a system prompt factory's text became."""
    return _source(message) == FACTORY_SOURCE


def factory_replaces(message: Mapping[str, Any]) -> bool:
    """Whether the factory's message stands in for this stored system message (every one
    but those a hook injected)."""
    return _source(message) != "hook"


def _source(message: Mapping[str, Any]) -> object:
    meta = message.get("metadata")
    return meta.get("source") if isinstance(meta, Mapping) else None  # type: ignore[union-attr]
