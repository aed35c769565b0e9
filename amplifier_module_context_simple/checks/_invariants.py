"""``check_view``: the rules every provider-facing view must satisfy, in one place.

Tests, the end-to-end session and the ``context-simple`` replay run it on every view they
produce; the request path is built to satisfy it by construction. It returns human-readable
violations instead of raising, so a failure shows all of them at once.

:class:`ViewChecker` gives the same verdict as ``check_view(view, history=history)`` for a
history that only grows (as a session's does), in time that does not grow with the history:
it keeps the few history facts the rules read up to date as messages are appended, instead of
projecting the whole history again for every view. A replay checks every one of thousands of
views, which ``check_view`` alone makes quadratic.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_JSON_CAP",
    "ViewChecker",
    "check_view",
    "sent_forms",
    "shared_start",
]

import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..history._ids import IdAssigner
from ..history._project import project
from ..history._turn_rule import TurnReader, part_of
from ..views._render import factory_replaces, is_factory_message
from ..vocabulary._messages import SIGNED_THINKING_TYPES, blocks, is_human_prompt
from ..vocabulary._pairing import ToolPairing
from ..vocabulary._public import is_reference_only
from ._view_scan import Shape, ViewScan, makes_calls, shape_of

DEFAULT_JSON_CAP = 131_072
"""The ingress cap the view's JSON projection of unknown blocks is bounded by (its default)."""


def check_view(
    view: Sequence[Mapping[str, Any]],
    *,
    history: Sequence[Mapping[str, Any]] | None = None,
    json_cap: int = DEFAULT_JSON_CAP,
) -> list[str]:
    """List the invariant violations of ``view`` (an empty list means valid).

    Without ``history`` only the view's own structure is checked: tool pairing and adjacency,
    duplicates (a message object, or a tool-call id, twice), no call block outside an
    assistant message nor result block outside a user or tool message, system messages
    first, no public-history metadata key (a display-only row, a public copy). With
    ``history`` (the canonical messages it was built from) it also checks that the system
    messages are unchanged, that the first and last human prompts are present, that the
    latest assistant turn's thinking blocks are intact, and that no turn was split: a human
    prompt follows a tool result only where it did in the history, and an active turn that
    opens with a thinking assistant message still opens with it. History messages are
    compared as the view sends them (their host-model projection, with the view's ids).
    ``json_cap`` is the manager's ``max_tool_result_bytes`` when it is not the default (it
    bounds the JSON text an unknown block is sent as, so it decides the sent form).
    """
    scan = ViewScan()
    for message in view:
        scan.feed(message, shape_of(message))
    if history is None:
        return scan.problems()
    facts = _HistoryFacts(json_cap)
    for message in history:
        facts.append(message)
    return scan.problems() + _check_against_history(view, scan, facts, None)


class ViewChecker:
    """``check_view(view, history=history)`` for a history that only grows, in linear time.

    :meth:`check` gives exactly ``check_view``'s list for the same arguments, provided every
    history it is handed extends the previous one (the same message objects, more of them at
    the end), as a session's history does. It keeps the history facts the rules read (the
    system messages, the first and last human prompts, the latest assistant turn, the prompts
    that follow a tool round, the active turn's opener, each in its sent form) and feeds it
    only the messages that are new since the last call, so a view costs what the view costs,
    not what the history costs. A history that is shorter, or whose last checked message was
    replaced, is taken as a new history and read again from the start.
    """

    def __init__(self, json_cap: int = DEFAULT_JSON_CAP) -> None:
        self._json_cap = json_cap
        self._facts = _HistoryFacts(json_cap)
        self._last: Mapping[str, Any] | None = None
        # Verdicts of rule (a) per rendered prompt, by identity; the message is held so its id
        # cannot be reused, and only the current view's entries are kept.
        self._prompts: dict[int, _PromptVerdict] = {}
        # The previous view and the scan of it, whole and without its last message: a sticky
        # view re-sends the previous one (less its compaction notice) and adds to its end, so
        # only the added messages are scanned.
        self._view: list[Mapping[str, Any]] = []
        self._at_end: ViewScan | None = None
        self._before_last: ViewScan | None = None
        # Shapes by identity (the message is held so its id cannot be reused): those of the
        # views since the last compacted one, and of the views before it.
        self._shapes: dict[int, tuple[Mapping[str, Any], Shape]] = {}
        self._earlier_shapes: dict[int, tuple[Mapping[str, Any], Shape]] = {}

    def check(
        self,
        view: Sequence[Mapping[str, Any]],
        history: Sequence[Mapping[str, Any]],
        *,
        shared: int | None = None,
    ) -> list[str]:
        """The violations of ``view`` against ``history`` (empty: valid), as ``check_view``.

        ``shared``: ``shared_start(previous, view)`` for the view this checker was handed last,
        when the caller has counted it already (a replay hands one view to several checks).
        """
        self._sync(history)
        scan = self._scan(view, shared_start(self._view, view) if shared is None else shared)
        return scan.problems() + _check_against_history(view, scan, self._facts, self._prompts)

    def _scan(self, view: Sequence[Mapping[str, Any]], count: int) -> ViewScan:
        base: ViewScan | None = None
        before_last: ViewScan | None = None
        if count and count == len(self._view):
            base, before_last = self._at_end, self._before_last
        elif count:
            base = self._before_last
        if base is None:
            # A compacted view: scanned whole, but most of its messages were in the last one.
            scan, count = ViewScan(), 0
            self._earlier_shapes, self._shapes = self._shapes, {}
        else:
            # Fed on in place, not copied: both kept scans are replaced below, so nothing
            # else holds the one this view extends.
            scan = base
        for index in range(count, len(view)):
            message = view[index]
            shape = self._shape(message)
            # Kept only where the next view may drop this last message: a user-role message
            # no person typed (the compaction notice is one); otherwise that view rescans.
            if index == len(view) - 1:
                before_last = scan.copy() if shape.merges else None
            scan.feed(message, shape)
        self._view, self._at_end, self._before_last = list(view), scan, before_last
        return scan

    def _shape(self, message: Mapping[str, Any]) -> Shape:
        key = id(message)
        entry = self._shapes.get(key) or self._earlier_shapes.get(key)
        if entry is None or entry[0] is not message:
            entry = (message, shape_of(message))
        self._shapes[key] = entry
        return entry[1]

    def _sync(self, history: Sequence[Mapping[str, Any]]) -> None:
        seen = self._facts.count
        if len(history) < seen or (seen and history[seen - 1] is not self._last):
            self._facts = _HistoryFacts(self._json_cap)
            self._prompts = {}
            seen = 0
        for position in range(seen, len(history)):
            self._facts.append(history[position])
        if history:
            self._last = history[-1]


@dataclass
class _PromptVerdict:
    message: Mapping[str, Any]
    compared: int
    """How many of the history's prompts-after-a-result it has been compared with."""
    matched: bool


@dataclass
class _HistoryFacts:
    """What the history-dependent rules read, kept up to date one appended message at a time."""

    json_cap: int
    count: int = 0
    ids: IdAssigner = field(default_factory=IdAssigner)
    systems: list[Mapping[str, Any]] = field(default_factory=list[Mapping[str, Any]])
    first_human: Mapping[str, Any] | None = None
    last_human: Mapping[str, Any] | None = None
    """The first and last messages whose sent form is a human prompt (sent forms)."""
    latest_assistant: Mapping[str, Any] | None = None
    after_result: list[Mapping[str, Any]] = field(default_factory=list[Mapping[str, Any]])
    """Sent forms of the human prompts that follow a tool result or a call in the history."""
    after_round: bool = False
    """Whether a turn starting now would follow a tool round (a result, or a call)."""
    pairing: ToolPairing = field(default_factory=ToolPairing)
    turns: TurnReader = field(default_factory=TurnReader)
    """The history's turns as the provider reads them (``_turn_rule``)."""
    opener: Mapping[str, Any] | None = None
    """The sent form of the latest turn's opener (``turns.last_opener``, recorded when fed)."""

    def append(self, message: Mapping[str, Any]) -> None:
        position = self.count
        self.count += 1
        if is_reference_only(message):
            return  # a display-only row is never sent: no rule reads it (as the index)
        ids = self.ids.add(message, position)
        sent = project(message, ids, json_cap=self.json_cap)[0]
        role = message.get("role")
        # Classified as the history index classifies it: by the ids the view gives it, so
        # a result without an id of its own (the view derives one) is a result, not a prompt.
        human = is_human_prompt(message) and not ids.results
        result = role == "tool" or bool(ids.results)
        if role == "system":
            self.systems.append(sent)
        if human:
            if self.first_human is None:
                self.first_human = sent
            self.last_human = sent
            if self.after_round:
                self.after_result.append(sent)
        self.pairing.add(ids.calls, ids.results)
        if position not in self.pairing.orphans:  # an orphan result is never sent
            self.turns.feed(position, part_of(role, result=result, calls=makes_calls(message)))
            if self.turns.last_opener == position:
                self.opener = sent
        if role == "assistant":
            self.latest_assistant = sent
        # Every user-role message joins the user turn it follows, a typed prompt too (the
        # provider merges them), so only an answer, a call or a result decides whether a turn
        # starting now follows a tool round.
        if role == "assistant" or result:
            self.after_round = result or makes_calls(message)


def shared_start(previous: Sequence[object], view: Sequence[object]) -> int:
    """How many leading messages ``view`` re-sends of ``previous``, the very same objects.

    Only the two answers a sticky request gives are looked for: all of ``previous``, or all
    of it but its last message (the compaction notice, replaced on every request); otherwise 0.
    The comparison is by identity at C speed (equal copies are other messages).
    """
    count = len(previous)
    if not count or len(view) < count - 1:
        return 0
    # One pass either way: when the last message is re-sent, anything that differs before it
    # rules out both answers.
    if len(view) >= count and previous[-1] is view[count - 1]:
        return count if all(map(operator.is_, previous, view)) else 0
    if count > 1 and all(map(operator.is_, itertools.islice(previous, count - 1), view)):
        return count - 1
    return 0


def sent_forms(
    history: Sequence[Mapping[str, Any]], json_cap: int = DEFAULT_JSON_CAP
) -> list[Mapping[str, Any]]:
    """Each history message as the view sends it (the same pure steps as the request path;
    a display-only row is never sent, so it has none)."""
    ids = IdAssigner()
    return [
        project(message, ids.add(message, position), json_cap=json_cap)[0]
        for position, message in enumerate(history)
        if not is_reference_only(message)
    ]


def _check_against_history(
    view: Sequence[Mapping[str, Any]],
    scan: ViewScan,
    facts: _HistoryFacts,
    prompts: dict[int, _PromptVerdict] | None,
) -> list[str]:
    problems: list[str] = []
    # A system prompt factory's message stands for the static system messages it replaces.
    replaced = any(is_factory_message(s) for s in scan.systems)
    for message in facts.systems:
        if replaced and factory_replaces(message):
            continue
        if not any(_same_payload(message, s) for s in scan.systems):
            problems.append("a system message of the history is missing or changed in the view")
            break
    # The first prompt sits near the view's start and the last one is, as a rule, the view's
    # last prompt: look there first.
    last = [] if scan.last_human is None else [view[scan.last_human]]
    for label, prompt, order in (
        ("first", facts.first_human, view),
        ("last", facts.last_human, itertools.chain(last, reversed(view))),
    ):
        if prompt is not None and not any(_same_payload(prompt, m) for m in order):
            problems.append(f"the {label} human prompt is missing or changed in the view")
    latest = facts.latest_assistant
    if (
        latest is not None
        and any(b.get("type") in SIGNED_THINKING_TYPES for b in blocks(latest))
        and not any(_same_payload(latest, m) for m in reversed(view))
    ):
        problems.append("the latest assistant turn (with thinking) is missing or changed")
    problems += _check_turns(view, scan, facts, prompts)
    return problems


def _same_payload(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal as the provider sees them: role, content and tool calls."""
    # ``None`` content reaches the provider as "" (the host's model refuses None).
    return (
        a.get("role") == b.get("role")
        and (a.get("content") or "") == (b.get("content") or "")
        and a.get("tool_calls") == b.get("tool_calls")
    )


def _check_turns(
    view: Sequence[Mapping[str, Any]],
    scan: ViewScan,
    facts: _HistoryFacts,
    prompts: dict[int, _PromptVerdict] | None,
) -> list[str]:
    """A view must not make the provider read a different conversation (issue 12, §3)."""
    problems: list[str] = []
    # (a) Consecutive user turns merge: a prompt after a tool result lands inside that round.
    # Allowed where the history had the prompt after a result, or after a call that a repair
    # answers in the view (interrupted, or answered late): nothing of the turn went missing.
    # System messages are lifted out of the conversation, and hook reminders and typed prompts
    # merge into the same user turn, so "before" looks past all three (the scan's candidates).
    kept: dict[int, _PromptVerdict] = {}
    for index, message in scan.candidates:
        if not _follows_a_result_in_history(message, facts, prompts, kept):
            problems.append(
                f"view[{index}]: a human prompt directly follows a tool result, which it does "
                "not in the history"
            )
    if prompts is not None:
        prompts.clear()
        prompts.update(kept)
    # (b) With thinking on (the history's latest turn opens with thinking), the turn the
    # provider reads as the active one in the view must open with a thinking block too. Both
    # turns are read by the one rule (``_turn_rule``). The view may open it with another of the
    # history's thinking rounds (an earlier one was left out): the provider reads only the
    # first block of the turn. A view that ends in a user turn without results opens none.
    opener = facts.opener
    if opener is not None and _opens_with_thinking(opener):
        start = scan.turns.active().opener
        if start is not None and not _opens_with_thinking(view[start]):
            problems.append(
                "the active turn does not open with the history's thinking assistant message"
            )
    return problems


def _opens_with_thinking(message: Mapping[str, Any]) -> bool:
    """Whether the provider reads a thinking block first (``reasoning`` items are not sent)."""
    first = next((b for b in blocks(message) if b.get("type") != "reasoning"), None)
    return first is not None and first.get("type") in SIGNED_THINKING_TYPES


def _follows_a_result_in_history(
    message: Mapping[str, Any],
    facts: _HistoryFacts,
    prompts: dict[int, _PromptVerdict] | None,
    kept: dict[int, _PromptVerdict],
) -> bool:
    """Whether the history has this prompt after a tool result; with ``prompts``, the verdict
    is kept per message and later calls compare it only with the prompts added since."""
    verdict = prompts.get(id(message)) if prompts is not None else None
    if verdict is None or verdict.message is not message:
        verdict = _PromptVerdict(message, 0, False)
    if not verdict.matched:
        fresh = facts.after_result[verdict.compared :]
        verdict.matched = any(_same_payload(sent, message) for sent in fresh)
        verdict.compared = len(facts.after_result)
    kept[id(message)] = verdict
    return verdict.matched
