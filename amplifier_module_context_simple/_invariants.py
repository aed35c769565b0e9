"""``check_view``: the rules every provider-facing view must satisfy, in one place.

Tests, the end-to-end session and the ``context-simple`` replay run it on every view they
produce; the request path is built to satisfy it by construction. It returns human-readable
violations instead of raising, so a failure shows all of them at once.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_JSON_CAP",
    "check_view",
    "sent_forms",
]

from collections.abc import Mapping, Sequence
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
    problems: list[str] = []
    problems += _check_pairing(view)
    problems += _check_duplicates(view)
    problems += _check_system_first(view)
    if history is not None:
        sent = sent_forms(history, json_cap)
        problems += _check_against_history(view, sent)
        problems += _check_turns(view, history, sent)
    return problems


def sent_forms(
    history: Sequence[Mapping[str, Any]], json_cap: int = DEFAULT_JSON_CAP
) -> list[Mapping[str, Any]]:
    """Each history message as the view sends it (the same pure steps as the request path)."""
    ids = IdAssigner()
    return [
        project(message, ids.add(message, position), json_cap=json_cap)[0]
        for position, message in enumerate(history)
    ]


def _check_pairing(view: Sequence[Mapping[str, Any]]) -> list[str]:
    problems: list[str] = []
    open_ids: set[str] = set()  # ids of the most recent call message still awaiting results
    open_index: int | None = None
    answered_ever: set[str] = set()
    for index, message in enumerate(view):
        answered = result_ids(message)
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
        declared = call_ids(message)
        if declared:
            open_ids = set(declared)
            open_index = index
    # An unanswered call at the very end is allowed: the orchestrator is still executing it.
    return problems


def _check_duplicates(view: Sequence[Mapping[str, Any]]) -> list[str]:
    # Providers refuse a request in which a tool-call id repeats, even after the first use
    # was answered ("tool_use ids must be unique"); the view renames reused ids to avoid it.
    problems: list[str] = []
    seen_objects: dict[int, int] = {}
    declared: dict[str, int] = {}
    for index, message in enumerate(view):
        first = seen_objects.setdefault(id(message), index)
        if first != index:
            problems.append(f"view[{index}]: the same message object already appears at {first}")
        for call_id in call_ids(message):
            earlier = declared.setdefault(call_id, index)
            if earlier != index:
                problems.append(
                    f"view[{index}]: tool-call id {call_id!r} is already declared at {earlier}"
                )
        # Within one message an orchestrator stores each call twice (tool_calls and a block),
        # so a repeat counts only inside one of those sources.
        for source in raw_call_ids(message):
            named = [i for i in source if isinstance(i, str) and i]
            for call_id in sorted({i for i in named if named.count(i) > 1}):
                problems.append(f"view[{index}]: tool-call id {call_id!r} is declared twice")
    return problems


def _check_system_first(view: Sequence[Mapping[str, Any]]) -> list[str]:
    seen_other = False
    for index, message in enumerate(view):
        if message.get("role") == "system":
            if seen_other:
                return [f"view[{index}]: system message after a non-system message"]
        else:
            seen_other = True
    return []


def _check_against_history(
    view: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]
) -> list[str]:
    problems: list[str] = []
    view_systems = [m for m in view if m.get("role") == "system"]
    for message in history:
        if message.get("role") == "system" and not any(
            _same_payload(message, s) for s in view_systems
        ):
            problems.append("a system message of the history is missing or changed in the view")
            break
    humans = [m for m in history if is_human_prompt(m)]
    for label, prompt in (("first", humans[:1]), ("last", humans[-1:])):
        if prompt and not any(_same_payload(prompt[0], m) for m in view):
            problems.append(f"the {label} human prompt is missing or changed in the view")
    latest = next((m for m in reversed(history) if m.get("role") == "assistant"), None)
    if latest is not None:
        thinking = [b for b in blocks(latest) if b.get("type") in SIGNED_THINKING_TYPES]
        if thinking:
            kept = next((m for m in view if _same_payload(latest, m)), None)
            if kept is None:
                problems.append("the latest assistant turn (with thinking) is missing or changed")
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


def _turn_before(messages: Sequence[Mapping[str, Any]], index: int) -> Mapping[str, Any] | None:
    """The message the provider reads right before ``index``'s turn starts.

    System messages are lifted out, and user-role messages no person typed (hook reminders,
    the compaction notice) merge into the user turn around them.
    """
    for position in range(index - 1, -1, -1):
        message = messages[position]
        if message.get("role") == "system":
            continue
        if (
            message.get("role") == "user"
            and not is_human_prompt(message)
            and not is_tool_result(message)
        ):
            continue
        return message
    return None


def _check_turns(
    view: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    sent: Sequence[Mapping[str, Any]],
) -> list[str]:
    """A view must not make the provider read a different conversation (issue 12, §3)."""
    problems: list[str] = []
    # (a) Consecutive user turns merge: a prompt after a tool result lands inside that round.
    # Allowed where the history had the prompt after a result, or after a call that a repair
    # answers in the view (interrupted, or answered late): nothing of the turn went missing.
    # System messages are lifted out of the conversation and hook reminders merge into the
    # same user turn, so "before" looks past both.
    after_result = [
        p
        for p, message in enumerate(history)
        if is_human_prompt(message)
        and (before := _turn_before(history, p)) is not None
        and (is_tool_result(before) or _calls(before))
    ]
    for index, message in enumerate(view):
        if not is_human_prompt(message):
            continue
        before = _turn_before(view, index)
        if before is None or not is_tool_result(before):
            continue
        if not any(_same_payload(sent[p], message) for p in after_result):
            problems.append(
                f"view[{index}]: a human prompt directly follows a tool result, which it does "
                "not in the history"
            )
    # (b) With thinking on, the active turn must open with its thinking assistant message.
    opener = _active_opener(history)
    if (
        opener is not None
        and history[opener].get("role") == "assistant"
        and any(b.get("type") in SIGNED_THINKING_TYPES for b in blocks(history[opener]))
    ):
        start = _active_opener(view)
        if start is None or not _same_payload(sent[opener], view[start]):
            problems.append(
                "the active turn does not open with the history's thinking assistant message"
            )
    return problems


def _active_opener(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The position right after the last human prompt, if anything follows it."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if is_human_prompt(messages[i])), None)
    if last is None or last + 1 >= len(messages):
        return None
    return last + 1
