"""What each request's view did to the history: which messages left it, were shortened or
stubbed, at which request and by which compaction level.

:class:`PositionIndex` maps a view message back to its history position (by identity, or by
the metadata dict a shortened, stubbed or re-projected copy shares with its original); both
``inspect``'s view description and :class:`DropTracker` use it. The tracker compares each view
with the previous one only, and keeps per history position just the changes it went through
(:class:`Drop`), so its memory stays linear in the history and its work per request is what
the view itself costs plus the messages added since the previous request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ... import estimate_message_tokens
from ...checks._invariants import shared_start
from ...views._render import NOTICE_SOURCE, text_of
from ...vocabulary._calls import calls_made
from ...vocabulary._messages import (
    REPAIRED_KEY,
    STUBBED_KEY,
    TRUNCATED_KEY,
    call_ids,
    metadata,
    result_ids,
)

__all__ = [
    "ARGUMENT_CHARS",
    "FIRST_LINE_CHARS",
    "LEFT",
    "RESTORED",
    "SHORTENED",
    "STUBBED",
    "WHOLE",
    "Drop",
    "DropTracker",
    "PositionIndex",
    "call_text",
    "calls_made",
    "drops_at",
    "explain",
    "first_line",
    "is_notice",
    "left_by_agent",
    "main_argument",
    "tool_names",
]

WHOLE = "whole"
SHORTENED = "shortened"
"""A tool result the view sent truncated (``TRUNCATED_KEY``)."""
STUBBED = "stubbed"
"""A user message the view replaced by a stub (``STUBBED_KEY``)."""
LEFT = "left out"
"""Not in the view at all."""
RESTORED = "restored"
"""Back in the view after having been left out (a change kind, never a form)."""
FIRST_LINE_CHARS = 80
ARGUMENT_CHARS = 60
"""The most of a call's main argument a drop shows (a command can be a whole script)."""

_MAIN_ARGUMENT_KEYS = (
    "file_path", "path", "notebook_path", "command", "pattern", "query", "url", "agent",
    "instruction", "prompt", "action", "operation", "name",
)  # fmt: skip
"""Argument names that say what a call was about, the most telling first: the tools of
Amplifier's foundation bundle and of Claude Code name their target with one of these."""


def is_notice(message: Mapping[str, Any]) -> bool:
    """The compaction notice the view appends (not a history message)."""
    return message.get("role") == "user" and metadata(message).get("source") == NOTICE_SOURCE


# Where str.splitlines() ends a line: every one of these is white space to str.strip().
_LINE_END = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def first_line(message: Mapping[str, Any], limit: int = FIRST_LINE_CHARS) -> str:
    """The message's first non-empty line of text, or what it calls when it has no text."""
    # The first line of the text without its leading white space (blank lines included), so
    # a 100 KB tool result is not split into lines to read its first one.
    text = text_of(message).lstrip()
    end = _LINE_END.search(text)
    line = (text if end is None else text[: end.start()]).rstrip()
    if not line:
        names = tool_names(message)
        line = f"calls {', '.join(names)}" if names else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tool_names(message: Mapping[str, Any]) -> list[str]:
    """The tools an assistant message calls, in order (both call shapes and call blocks)."""
    return [name for _, name, _ in _calls(message)]


def call_text(tool: str | None, argument: str | None) -> str:
    """A tool result's call as the tables show it: the tool's name and its main argument."""
    return " ".join(part for part in (tool, argument) if part)


def main_argument(arguments: object) -> str | None:
    """What a call was about, from its arguments: the first of the telling names it has
    (a path, a command, a pattern...), else its first text argument; one line, shortened."""
    if isinstance(arguments, str):  # OpenAI-shaped arguments are JSON text
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping) or not arguments:
        return None
    named = cast(Mapping[str, object], arguments)
    texts = [named[k] for k in _MAIN_ARGUMENT_KEYS if isinstance(named.get(k), str)]
    texts = texts or [v for v in named.values() if isinstance(v, str)]
    line = next((str(t).strip().split("\n", 1)[0].rstrip() for t in texts if str(t).strip()), None)
    if line is None:
        return None
    return line if len(line) <= ARGUMENT_CHARS else line[: ARGUMENT_CHARS - 1] + "…"


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(call id, tool name, main argument) for every call the message makes."""
    return [(i, name, main_argument(arguments)) for i, name, arguments in calls_made(message)]


class PositionIndex:
    """History position of a view message, kept in step with a growing history.

    The history keeps its dicts alive, so their ``id()`` stays a valid key. :meth:`sync`
    indexes only the messages added since the last call.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, int] = {}
        self._by_meta: dict[int, int] = {}
        self._tool_of_call: dict[str, str] = {}
        self._argument_of_call: dict[str, str] = {}
        self.size = 0
        """How many history messages are indexed."""

    def sync(self, history: Sequence[Mapping[str, Any]]) -> range:
        """Index the messages added since the last call; returns their positions."""
        added = range(self.size, len(history))
        for position in added:
            message = history[position]
            self._by_id[id(message)] = position
            if "metadata" in message:
                self._by_meta[id(message["metadata"])] = position
            for call_id, name, argument in _calls(message):
                self._tool_of_call.setdefault(call_id, name)
                if argument is not None:
                    self._argument_of_call.setdefault(call_id, argument)
        self.size = len(history)
        return added

    def locate(self, message: Mapping[str, Any]) -> int | None:
        """The position of ``message`` (a history message or the view's copy of one)."""
        position = self._by_id.get(id(message))
        if position is None and not (message.get(REPAIRED_KEY) or is_notice(message)):
            # Truncated, stubbed or content-fixed copies share the history's metadata dict.
            position = self._by_meta.get(id(message.get("metadata")))
        return position

    def tool(self, message: Mapping[str, Any]) -> str | None:
        """For a tool result, the tool that was called; for a call, the tools it calls."""
        answered = result_ids(message)
        if answered:
            names = [self._tool_of_call.get(i, "?") for i in answered]
            return ", ".join(dict.fromkeys(names))
        if call_ids(message) or message.get("tool_calls"):
            return ", ".join(dict.fromkeys(tool_names(message))) or None
        return None

    def call_argument(self, message: Mapping[str, Any]) -> str | None:
        """For a tool result, the main argument of the call it answers (its path, its
        command...); None for anything else or a call that named none."""
        answered = result_ids(message)
        arguments = [self._argument_of_call[i] for i in answered if i in self._argument_of_call]
        return ", ".join(dict.fromkeys(arguments)) or None


@dataclass(frozen=True)
class Drop:
    """One change a view made to one history message, at the request that first showed it."""

    position: int
    """0-based position among the replayed messages (across the agent's own compactions)."""
    request: int
    """The request whose view first showed the change."""
    change: str
    """``LEFT``, ``SHORTENED``, ``STUBBED`` or ``RESTORED`` (``WHOLE`` again, un-shortened)."""
    level: int
    """The manager's compaction level after that request."""
    compacted: bool
    """A compaction happened at that request (else: a pairing repair left it out)."""
    role: str
    tool: str | None
    """For a tool result the tool that was called; for a call the tools it calls."""
    call_argument: str | None
    """For a tool result, the main argument of the call that produced it (see
    :func:`main_argument`)."""
    tokens_before: int
    """What it cost in the previous view (its whole size when no view had sent it yet)."""
    tokens_after: int
    """What it costs in this view (0 when left out)."""
    first_line: str


def drops_at(drops: Sequence[Drop], position: int) -> list[Drop]:
    """The changes message ``position`` went through, in request order."""
    return [d for d in drops if d.position == position]


def explain(
    position: int,
    history: Sequence[Mapping[str, Any]],
    drops: Sequence[Drop],
    history_at: Sequence[int],
    *,
    family: str | None,
    agent_left: int | None = None,
) -> list[str]:
    """Message ``position``'s story, one line each: what it is, then every change a view made
    to it, or that it never left. ``history_at`` is the history length at each request;
    ``agent_left`` the first request after the agent's own compaction left it behind
    (:func:`left_by_agent`), whose view and the later ones were no longer cut from it."""
    message = history[position]
    index = PositionIndex()
    index.sync(history)
    tool = call_text(index.tool(message), index.call_argument(message))
    what = str(message.get("role", "")) + (f" ({tool})" if tool else "")
    tokens = estimate_message_tokens(message, family=family)
    lines = [f"{what}, {tokens:,} tokens: {first_line(message)}"]
    first = next((i + 1 for i, size in enumerate(history_at) if size > position), None)
    by_agent = (
        []
        if agent_left is None
        else [f"request {agent_left}: left behind by the agent's own compaction (its summary on)"]
    )
    if first is None or first == agent_left:
        lines.append("no request came after it, so no view was asked to hold it")
        return lines + by_agent
    last = len(history_at) if agent_left is None else agent_left - 1
    changes = drops_at(drops, position)
    if not changes:
        lines.append(f"never left the view: whole in every view, requests {first}-{last}")
        return lines + by_agent
    for d in changes:
        cause = (
            f"by the compaction at level {d.level}"
            if d.compacted
            else "with no compaction at that request (a pairing repair)"
        )
        lines.append(
            f"request {d.request}: {d.change} {cause}, "
            f"{d.tokens_before:,} → {d.tokens_after:,} tokens"
        )
    final = changes[-1].change
    state = WHOLE if final == RESTORED else final
    lines.append(f"in the last view (request {last}): {state}")
    return lines + by_agent


def left_by_agent(
    position: int, boundaries: Iterable[int], at_messages: Sequence[int]
) -> int | None:
    """The first request (1-based) whose history the agent's own compaction started afresh
    after message ``position``; ``None`` when no boundary after it has a request after it.
    ``at_messages``: each request's place among the messages (the message it comes before)."""
    boundary = min((b for b in boundaries if b > position), default=None)
    if boundary is None:
        return None
    return next((i + 1 for i, at in enumerate(at_messages) if at >= boundary), None)


@dataclass
class DropTracker:
    """Compares each view with the previous one and records every change as a :class:`Drop`."""

    family: str | None
    drops: list[Drop] = field(default_factory=list[Drop])
    known: Mapping[int, int] = field(default_factory=dict[int, int])
    """``id`` -> tokens of messages already estimated (the caller keeps them alive)."""
    offset: int = 0
    """What a history position is shifted by in the records: where this history began among
    the replayed messages (after the agent's own compaction, its summary's place)."""
    index: PositionIndex = field(default_factory=PositionIndex)
    _current: dict[int, tuple[str, Mapping[str, Any]]] = field(
        default_factory=dict[int, tuple[str, Mapping[str, Any]]]
    )
    """Position -> (form, the message as sent) in the previous view."""
    _view: list[Mapping[str, Any]] = field(default_factory=list[Mapping[str, Any]])
    _positions: list[int | None] = field(default_factory=list[int | None])
    """The previous view and each of its messages' history position (None: not history)."""

    def observe(
        self,
        request: int,
        view: Sequence[Mapping[str, Any]],
        history: Sequence[Mapping[str, Any]],
        *,
        level: int,
        compacted: bool,
        shared: int | None = None,
    ) -> list[Drop]:
        """Record what ``view`` (request ``request``) changed; returns the new records.

        Only the part of ``view`` past what it shares with the previous view (by identity)
        is looked at: a view that extends the last one costs its new messages, so a replay
        stays linear. Token figures are estimated only for the messages that changed.
        ``shared``: ``shared_start(previous, view)`` for the view this tracker was handed last,
        when the caller has counted it already.
        """
        added = self.index.sync(history)
        start = shared_start(self._view, view) if shared is None else shared
        before = {p: self._current[p] for p in self._positions[start:] if p is not None}
        positions = [self.index.locate(m) for m in view[start:]]
        after: dict[int, tuple[str, Mapping[str, Any]]] = {}
        for position, message in zip(positions, view[start:], strict=True):
            if position is None:
                continue  # the notice or a placeholder result: no history message
            form = SHORTENED if message.get(TRUNCATED_KEY) else WHOLE
            after[position] = (STUBBED if message.get(STUBBED_KEY) else form, message)
        fresh: list[Drop] = []

        def note(position: int, change: str, before: int, after: int) -> None:
            message = history[position]
            fresh.append(
                Drop(
                    position=self.offset + position, request=request, change=change, level=level,
                    compacted=compacted, role=str(message.get("role", "")),
                    tool=self.index.tool(message),
                    call_argument=self.index.call_argument(message),
                    tokens_before=before, tokens_after=after,
                    first_line=first_line(message),
                )
            )  # fmt: skip

        # The shared head is unchanged; a history message is in a view at most once, so what
        # left or changed form is in the previous view's tail, and what came back in the new.
        for position, (form, sent) in before.items():
            now = after.get(position)
            if now is None:
                note(position, LEFT, self._tokens(sent), 0)
            elif now[0] != form:
                change = RESTORED if now[0] == WHOLE else now[0]
                note(position, change, self._tokens(sent), self._tokens(now[1]))
        for position, (form, sent) in after.items():
            if position in before:
                continue
            if position not in added:
                note(position, RESTORED, 0, self._tokens(sent))
            elif form != WHOLE:
                note(position, form, self._tokens(history[position]), self._tokens(sent))
        for position in before:
            del self._current[position]
        self._current.update(after)
        for position in added:
            if position not in self._current:  # added since the last request and never sent
                note(position, LEFT, self._tokens(history[position]), 0)
        fresh.sort(key=lambda d: d.position)
        self.drops.extend(fresh)
        self._view = list(view)
        self._positions[start:] = positions
        return fresh

    def _tokens(self, message: Mapping[str, Any]) -> int:
        known = self.known.get(id(message))
        return known if known is not None else estimate_message_tokens(message, family=self.family)
