"""The tool-call ids a view sends: unique, well formed, and the same on every request.

Histories reuse ids (agents that number calls per turn, merged transcripts), and some carry
calls without a usable id (an int, ``""``, none at all). Providers refuse both: Anthropic
wants every ``tool_use`` id unique in a request, OpenAI every ``call_id``. So the view
renames, and the history keeps what was admitted.

A call whose id an earlier call already used gets a derived id, and so does one whose id a
provider would refuse (characters outside ``SAFE_ID``, longer than ``LONG_ID_LIMIT``); a call
without a string id gets one made up. Each is derived only from the call's position in the
history and from the ids before it, so a request sees the same ids as the one before (the
provider's prefix cache survives) and a later message can never change an earlier id. A result
follows the call it answers: the newest earlier call that declared its original id, as in
pairing.

:class:`IdAssigner` is fed the history in order, one message at a time, like the pairing.
"""

from __future__ import annotations

__all__ = [
    "LONG_ID_LIMIT",
    "NO_IDS",
    "SAFE_ID",
    "SHORT_ID_LIMIT",
    "UNPAIRED",
    "IdAssigner",
    "Ids",
    "raw_call_ids",
    "raw_result_ids",
    "tool_block_fits",
    "usable",
    "well_formed",
]

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ..vocabulary._messages import (
    CALL_BLOCK_TYPES,
    RESULT_BLOCK_ROLES,
    RESULT_BLOCK_TYPES,
    RESULT_ROLES,
    block_dict,
    is_mapping,
)

SAFE_ID = re.compile(r"[A-Za-z0-9_-]+")
SHORT_ID_LIMIT = 40
"""OpenAI chat completions refuse call ids longer than this."""
LONG_ID_LIMIT = 64
"""The Responses API's ``call_id`` limit: no derived id is ever longer."""
UNPAIRED = "\x00unpaired"
"""Prefix of a result id that must not pair with anything (never sent: orphans are dropped)."""


def usable(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def well_formed(value: str) -> bool:
    """An id every provider takes as it is: ``SAFE_ID`` characters, ``LONG_ID_LIMIT`` at most."""
    return len(value) <= LONG_ID_LIMIT and SAFE_ID.fullmatch(value) is not None


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


_NO_MAP: Mapping[str, str] = MappingProxyType({})


class Ids(NamedTuple):
    """The view ids of one message, and how to apply them to its blocks.

    A named tuple rather than a frozen dataclass: one is made for every message the history
    index or a view checker reads, and a tuple is built several times faster.
    """

    calls: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    call_map: Mapping[str, str] = _NO_MAP
    """Original call id -> view id, only where they differ."""
    idless_calls: tuple[str, ...] = ()
    """View ids for the calls without a usable id, by their order in each source."""
    repeated_calls: bool = False
    """The message declares one id twice in the same source: the view sends it once."""
    result_map: Mapping[str, str] = _NO_MAP
    idless_results: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(
            self.call_map
            or self.idless_calls
            or self.result_map
            or self.idless_results
            or self.repeated_calls
        )


NO_IDS = Ids()


def tool_block_fits(kind: object, role: object) -> bool:
    """Whether a block of type ``kind`` may stand in a message of ``role``: a call only in an
    assistant message, a result only where results come back. Pairing reads a call or a result
    nowhere else, and providers refuse one anywhere else (a ``tool_use`` outside the assistant
    turn, a ``tool_result`` that answers nothing before it)."""
    if kind in CALL_BLOCK_TYPES:
        return role == "assistant"
    if kind in RESULT_BLOCK_TYPES:
        return role in RESULT_BLOCK_ROLES
    return True


def raw_call_ids(message: Mapping[str, Any]) -> tuple[list[object], list[object]]:
    """The raw ids of an assistant's calls: from ``tool_calls`` and from call blocks."""
    if message.get("role") != "assistant":
        return [], []
    listed: list[object] = []
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:  # pyright: ignore[reportUnknownVariableType]
            if is_mapping(call):
                listed.append(call.get("id") or call.get("tool_call_id"))  # pyright: ignore[reportUnknownMemberType]
    in_blocks: list[object] = []
    content = message.get("content")
    if isinstance(content, list):
        for block in content:  # pyright: ignore[reportUnknownVariableType]
            data = block_dict(block)
            if data is not None and data.get("type") in CALL_BLOCK_TYPES:
                in_blocks.append(data.get("id"))
    return listed, in_blocks


def raw_result_ids(message: Mapping[str, Any]) -> list[object]:
    """The raw ids a message answers; ``None`` stands for a tool message without one."""
    role = message.get("role")
    found: list[object] = []
    if role in RESULT_BLOCK_ROLES:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:  # pyright: ignore[reportUnknownVariableType]
                data = block_dict(block)
                if data is not None and data.get("type") in RESULT_BLOCK_TYPES:
                    found.append(data.get("tool_call_id") or data.get("tool_use_id"))
    if role in RESULT_ROLES:
        own = message.get("tool_call_id") or message.get("tool_use_id")
        if usable(own) or not found:
            found.insert(0, own if usable(own) else None)
    return found


class IdAssigner:
    """Assigns view ids message by message, in history order."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._derived: set[str] = set()
        self._latest: dict[str, str] = {}
        self._idless_waiting: list[str] = []

    def add(self, message: Mapping[str, Any], position: int) -> Ids:
        listed, in_blocks = raw_call_ids(message)
        if listed or in_blocks:
            return self._calls(listed, in_blocks, position)
        raw = raw_result_ids(message)
        if raw:
            return self._results(raw, position)
        return NO_IDS

    def add_as_sent(self, calls: tuple[str, ...]) -> bool:
        """Record a message's calls (one or more) whose ids the view sends as they are
        (distinct, well formed, never used before), as ``add`` would; ``False``, recording
        nothing, when any is not: then ``add`` decides. One check for the whole message."""
        used = self._used
        if (
            len(set(calls)) != len(calls)
            or not used.isdisjoint(calls)
            or max(map(len, calls)) > LONG_ID_LIMIT
            or SAFE_ID.fullmatch("".join(calls)) is None  # each is safe iff all are
        ):
            return False
        used.update(calls)
        self._latest.update(zip(calls, calls, strict=True))
        return True

    def answers_as_sent(self, call_id: str) -> bool:
        """Whether a result carrying the usable ``call_id`` keeps it in the view (``add``
        would rename it: the call was renamed, or it copies an id we made up)."""
        view = self._latest.get(call_id)
        return call_id not in self._derived if view is None else view == call_id

    def _fresh(self, base: str, position: int) -> str:
        limit = SHORT_ID_LIMIT if len(base) <= SHORT_ID_LIMIT else LONG_ID_LIMIT
        attempt = 0
        while True:
            suffix = f"_r{position}" + (f"_{attempt}" if attempt else "")
            candidate = base[: limit - len(suffix)] + suffix
            if candidate not in self._used:
                self._used.add(candidate)
                self._derived.add(candidate)
                return candidate
            attempt += 1

    def _calls(self, listed: list[object], in_blocks: list[object], position: int) -> Ids:
        seen: set[str] = set()
        call_map: dict[str, str] = {}
        order: list[str] = []
        # Lists rather than generators: a resume assigns the ids of a whole history at once.
        good_listed = [v for v in listed if isinstance(v, str) and v]
        good_in_blocks = [v for v in in_blocks if isinstance(v, str) and v]
        # An orchestrator stores each call twice (``tool_calls`` and a ``tool_call`` block),
        # so the n-th id-less call of either source is taken to be the same call.
        idless_count = max(len(listed) - len(good_listed), len(in_blocks) - len(good_in_blocks))
        idless = tuple(self._fresh("call", position) for _ in range(idless_count))
        for value in (*good_listed, *good_in_blocks):
            if value in seen:
                continue
            if value in self._used:
                view = self._fresh(value, position)
            elif not well_formed(value):
                # Providers refuse it as it is: a derived id, as short as any endpoint wants.
                view = self._fresh(_UNSAFE.sub("_", value)[:SHORT_ID_LIMIT], position)
            else:
                view = value
            self._used.add(value)
            seen.add(value)
            self._latest[value] = view
            if view != value:
                call_map[value] = view
            order.append(view)
        if idless:
            self._idless_waiting = list(idless)
        return Ids(
            calls=(*order, *idless),
            call_map=call_map,
            idless_calls=idless,
            repeated_calls=_repeats(good_listed) or _repeats(good_in_blocks),
        )

    def _results(self, raw: list[object], position: int) -> Ids:
        views: list[str] = []
        changed: dict[str, str] = {}
        idless: list[str] = []
        for value in raw:
            if isinstance(value, str) and value:
                if value in self._latest:
                    view = self._latest[value]
                elif value in self._derived:
                    # A literal copy of an id we made up answers nothing of ours.
                    view = f"{UNPAIRED}:{value}"
                else:
                    view = value
                if view != value:
                    changed[value] = view
            else:
                waiting = self._idless_waiting
                view = waiting.pop(0) if waiting else f"{UNPAIRED}:{position}:{len(idless)}"
                idless.append(view)
            views.append(view)
        return Ids(
            results=tuple(dict.fromkeys(views)),
            result_map=changed,
            idless_results=tuple(idless),
        )


def _repeats(usable_ids: list[str]) -> bool:
    return len(set(usable_ids)) != len(usable_ids)
