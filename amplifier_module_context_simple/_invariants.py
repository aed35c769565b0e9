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
]

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._ids import IdAssigner, raw_call_ids
from ._messages import (
    SIGNED_THINKING_TYPES,
    blocks,
    call_ids,
    is_human_prompt,
    is_tool_result,
    result_ids,
)
from ._project import project

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
    duplicates (a message object, or a tool-call id, twice), system messages first. With
    ``history`` (the canonical messages it was built from) it also checks that the system
    messages are unchanged, that the first and last human prompts are present, that the
    latest assistant turn's thinking blocks are intact, and that no turn was split: a human
    prompt follows a tool result only where it did in the history, and an active turn that
    opens with a thinking assistant message still opens with it. History messages are
    compared as the view sends them (their host-model projection, with the view's ids).
    ``json_cap`` is the manager's ``max_tool_result_bytes`` when it is not the default (it
    bounds the JSON text an unknown block is sent as, so it decides the sent form).
    """
    shapes = [_shape(message) for message in view]
    if history is None:
        return _check_structure(view, shapes)
    facts = _HistoryFacts(json_cap)
    for message in history:
        facts.append(message)
    return _check_structure(view, shapes) + _check_against_history(view, shapes, facts, None)


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
        self._shapes = _ShapeCache()

    def check(
        self, view: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """The violations of ``view`` against ``history`` (empty: valid), as ``check_view``."""
        self._sync(history)
        shapes = self._shapes.shapes(view)
        return _check_structure(view, shapes) + _check_against_history(
            view, shapes, self._facts, self._prompts
        )

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
    turn_tail: Mapping[str, Any] | None = None
    """The message a turn starting now would follow (``_turn_before`` the next position)."""
    last_prompt: int | None = None
    """Position of the last human prompt (as stored, not as sent)."""
    opener: Mapping[str, Any] | None = None
    opener_sent: Mapping[str, Any] | None = None
    """The message right after the last human prompt, as stored and as sent."""

    def append(self, message: Mapping[str, Any]) -> None:
        position = self.count
        self.count += 1
        sent = project(message, self.ids.add(message, position), json_cap=self.json_cap)[0]
        if sent.get("role") == "system":
            self.systems.append(sent)
        if is_human_prompt(sent):
            if self.first_human is None:
                self.first_human = sent
            self.last_human = sent
        if sent.get("role") == "assistant":
            self.latest_assistant = sent
        if is_human_prompt(message):
            before = self.turn_tail
            if before is not None and (is_tool_result(before) or _calls(before)):
                self.after_result.append(sent)
            self.last_prompt = position
            self.opener = self.opener_sent = None
        elif self.last_prompt == position - 1:
            self.opener, self.opener_sent = message, sent
        if not _merges_into_turn(message):
            self.turn_tail = message


def sent_forms(
    history: Sequence[Mapping[str, Any]], json_cap: int = DEFAULT_JSON_CAP
) -> list[Mapping[str, Any]]:
    """Each history message as the view sends it (the same pure steps as the request path)."""
    ids = IdAssigner()
    return [
        project(message, ids.add(message, position), json_cap=json_cap)[0]
        for position, message in enumerate(history)
    ]


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the view rules read of one view message, computed once per rendered message."""

    role: object
    calls: tuple[str, ...]
    results: tuple[str, ...]
    repeated: tuple[str, ...]
    """Ids declared twice inside one source of the message (tool_calls, or its blocks)."""
    human: bool
    result: bool
    merges: bool
    """``_merges_into_turn``: lifted out of, or merged into, the turn around it."""


def _shape(message: Mapping[str, Any]) -> _Shape:
    repeated: list[str] = []
    # Within one message an orchestrator stores each call twice (tool_calls and a block),
    # so a repeat counts only inside one of those sources.
    for source in raw_call_ids(message):
        named = [i for i in source if isinstance(i, str) and i]
        repeated += sorted({i for i in named if named.count(i) > 1})
    return _Shape(
        role=message.get("role"),
        calls=call_ids(message),
        results=result_ids(message),
        repeated=tuple(repeated),
        human=is_human_prompt(message),
        result=is_tool_result(message),
        merges=_merges_into_turn(message),
    )


class _ShapeCache:
    """Shapes by message identity, for the messages of the latest view only.

    A sticky view re-sends the objects of the view before it, so most of a view is shaped once.
    The message is held beside its shape, so its ``id`` cannot be reused while cached.
    """

    def __init__(self) -> None:
        self._cached: dict[int, tuple[Mapping[str, Any], _Shape]] = {}

    def shapes(self, view: Sequence[Mapping[str, Any]]) -> list[_Shape]:
        cached = self._cached
        fresh: dict[int, tuple[Mapping[str, Any], _Shape]] = {}
        for message in view:
            entry = cached.get(id(message))
            if entry is None or entry[0] is not message:
                entry = (message, _shape(message))
            fresh[id(message)] = entry
        self._cached = fresh
        return [fresh[id(message)][1] for message in view]


def _check_structure(view: Sequence[Mapping[str, Any]], shapes: Sequence[_Shape]) -> list[str]:
    return _check_pairing(shapes) + _check_duplicates(view, shapes) + _check_system_first(shapes)


def _check_pairing(shapes: Sequence[_Shape]) -> list[str]:
    problems: list[str] = []
    open_ids: set[str] = set()  # ids of the most recent call message still awaiting results
    open_index: int | None = None
    answered_ever: set[str] = set()
    for index, shape in enumerate(shapes):
        answered = shape.results
        if answered:
            for call_id in answered:
                if call_id in open_ids:
                    open_ids.discard(call_id)
                    answered_ever.add(call_id)
                elif call_id in answered_ever:
                    problems.append(f"view[{index}]: second result for tool call {call_id!r}")
                else:
                    problems.append(
                        f"view[{index}]: tool result {call_id!r} does not directly follow its call"
                    )
            continue
        if open_ids and open_index is not None:
            problems.append(
                f"view[{open_index}]: tool call(s) {sorted(open_ids)} have no result before "
                f"view[{index}]"
            )
            open_ids = set()
        declared = shape.calls
        if declared:
            open_ids = set(declared)
            open_index = index
    # An unanswered call at the very end is allowed: the orchestrator is still executing it.
    return problems


def _check_duplicates(view: Sequence[Mapping[str, Any]], shapes: Sequence[_Shape]) -> list[str]:
    # Providers refuse a request in which a tool-call id repeats, even after the first use
    # was answered ("tool_use ids must be unique"); the view renames reused ids to avoid it.
    problems: list[str] = []
    seen_objects: dict[int, int] = {}
    declared: dict[str, int] = {}
    for index, (message, shape) in enumerate(zip(view, shapes, strict=True)):
        first = seen_objects.setdefault(id(message), index)
        if first != index:
            problems.append(f"view[{index}]: the same message object already appears at {first}")
        for call_id in shape.calls:
            earlier = declared.setdefault(call_id, index)
            if earlier != index:
                problems.append(
                    f"view[{index}]: tool-call id {call_id!r} is already declared at {earlier}"
                )
        for call_id in shape.repeated:
            problems.append(f"view[{index}]: tool-call id {call_id!r} is declared twice")
    return problems


def _check_system_first(shapes: Sequence[_Shape]) -> list[str]:
    seen_other = False
    for index, shape in enumerate(shapes):
        if shape.role == "system":
            if seen_other:
                return [f"view[{index}]: system message after a non-system message"]
        else:
            seen_other = True
    return []


def _check_against_history(
    view: Sequence[Mapping[str, Any]],
    shapes: Sequence[_Shape],
    facts: _HistoryFacts,
    prompts: dict[int, _PromptVerdict] | None,
) -> list[str]:
    problems: list[str] = []
    view_systems = [m for m, shape in zip(view, shapes, strict=True) if shape.role == "system"]
    for message in facts.systems:
        if not any(_same_payload(message, s) for s in view_systems):
            problems.append("a system message of the history is missing or changed in the view")
            break
    # The first prompt sits near the view's start and the last near its end: scan from there.
    for label, prompt, order in (
        ("first", facts.first_human, view),
        ("last", facts.last_human, reversed(view)),
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
    problems += _check_turns(view, shapes, facts, prompts)
    return problems


def _same_payload(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal as the provider sees them: role, content and tool calls."""
    # ``None`` content reaches the provider as "" (the host's model refuses None).
    return (
        a.get("role") == b.get("role")
        and (a.get("content") or "") == (b.get("content") or "")
        and a.get("tool_calls") == b.get("tool_calls")
    )


def _calls(message: Mapping[str, Any]) -> bool:
    """Whether it declares calls, with usable ids or not (the view answers both)."""
    listed, in_blocks = raw_call_ids(message)
    return bool(listed or in_blocks)


def _merges_into_turn(message: Mapping[str, Any]) -> bool:
    """Lifted out (a system message) or merged into the user turn around it (a user-role
    message no person typed: hook reminders, the compaction notice)."""
    if message.get("role") == "system":
        return True
    return (
        message.get("role") == "user"
        and not is_human_prompt(message)
        and not is_tool_result(message)
    )


def _turn_before(shapes: Sequence[_Shape], index: int) -> _Shape | None:
    """The message the provider reads right before ``index``'s turn starts.

    System messages are lifted out, and user-role messages no person typed (hook reminders,
    the compaction notice) merge into the user turn around them.
    """
    for position in range(index - 1, -1, -1):
        if not shapes[position].merges:
            return shapes[position]
    return None


def _check_turns(
    view: Sequence[Mapping[str, Any]],
    shapes: Sequence[_Shape],
    facts: _HistoryFacts,
    prompts: dict[int, _PromptVerdict] | None,
) -> list[str]:
    """A view must not make the provider read a different conversation (issue 12, §3)."""
    problems: list[str] = []
    # (a) Consecutive user turns merge: a prompt after a tool result lands inside that round.
    # Allowed where the history had the prompt after a result, or after a call that a repair
    # answers in the view (interrupted, or answered late): nothing of the turn went missing.
    # System messages are lifted out of the conversation and hook reminders merge into the
    # same user turn, so "before" looks past both.
    kept: dict[int, _PromptVerdict] = {}
    for index, (message, shape) in enumerate(zip(view, shapes, strict=True)):
        if not shape.human:
            continue
        before = _turn_before(shapes, index)
        if before is None or not before.result:
            continue
        if not _follows_a_result_in_history(message, facts, prompts, kept):
            problems.append(
                f"view[{index}]: a human prompt directly follows a tool result, which it does "
                "not in the history"
            )
    if prompts is not None:
        prompts.clear()
        prompts.update(kept)
    # (b) With thinking on, the active turn must open with its thinking assistant message.
    opener = facts.opener
    if (
        opener is not None
        and facts.opener_sent is not None
        and opener.get("role") == "assistant"
        and any(b.get("type") in SIGNED_THINKING_TYPES for b in blocks(opener))
    ):
        start = _active_opener(shapes)
        if start is None or not _same_payload(facts.opener_sent, view[start]):
            problems.append(
                "the active turn does not open with the history's thinking assistant message"
            )
    return problems


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


def _active_opener(shapes: Sequence[_Shape]) -> int | None:
    """The position right after the last human prompt, if anything follows it."""
    last = next((i for i in range(len(shapes) - 1, -1, -1) if shapes[i].human), None)
    if last is None or last + 1 >= len(shapes):
        return None
    return last + 1
