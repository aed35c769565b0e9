"""The view rules that read the view alone: pairing, adjacency, duplicates, call and result
blocks only where their role can carry them, systems first, and no key of Amplifier's public
history (``_public``).

``ViewScan`` is one pass over a view's messages that can stop and go on (``copy``), so a
checker can scan a view that extends the previous one from where that one ended. ``Shape`` is
what the rules read of a message, computed once per rendered message (``shape_of``).
``check_view`` (``_invariants``) adds the rules that compare the view with its history.
"""

from __future__ import annotations

__all__ = ["Shape", "ViewScan", "makes_calls", "merges", "shape_of"]

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..history._ids import raw_call_ids, tool_block_fits
from ..history._turn_rule import TurnReader, part_of
from ..vocabulary._messages import (
    blocks,
    call_ids,
    is_human_prompt,
    is_tool_result,
    result_ids,
)
from ..vocabulary._public import carries_public_marker


@dataclass(frozen=True, slots=True)
class Shape:
    """What the view rules read of one view message, computed once per rendered message."""

    role: object
    calls: tuple[str, ...]
    results: tuple[str, ...]
    repeated: tuple[str, ...]
    """Ids declared twice inside one source of the message (tool_calls, or its blocks)."""
    human: bool
    result: bool
    merges: bool
    """``merges``: lifted out of, or merged into, the turn around it."""
    misplaced: tuple[str, ...] = ()
    """Types of its call or result blocks that its role cannot carry (``tool_block_fits``)."""


def shape_of(message: Mapping[str, Any]) -> Shape:
    repeated: list[str] = []
    # Within one message an orchestrator stores each call twice (tool_calls and a block),
    # so a repeat counts only inside one of those sources.
    for source in raw_call_ids(message):
        named = [i for i in source if isinstance(i, str) and i]
        repeated += sorted({i for i in named if named.count(i) > 1})
    role = message.get("role")
    human, result = is_human_prompt(message), is_tool_result(message)
    misplaced = tuple(
        str(kind)
        for kind in (b.get("type") for b in blocks(message))
        if not tool_block_fits(kind, role)
    )
    return Shape(
        role=role,
        calls=call_ids(message),
        results=result_ids(message),
        repeated=tuple(repeated),
        human=human,
        result=result,
        merges=merges(role, human, result),
        misplaced=misplaced,
    )


class ViewScan:
    """The view rules that read the view alone, as one pass that can stop and go on.

    ``feed`` takes the view's messages in order; ``copy`` keeps the state at a point, so a
    view that extends an earlier one is scanned from where that one ended. Besides its own
    problems (pairing, duplicates, misplaced tool blocks, systems first, public-history keys)
    it records what the history rules need: the view's system messages, its human prompts that
    land in a tool round (nothing but system messages, reminders and other prompts between
    them and a result), where its last human prompt is, and its turns as the provider reads
    them.
    """

    __slots__ = (
        "answered_ever",
        "candidates",
        "count",
        "declared",
        "duplicates",
        "last_human",
        "misplaced",
        "open_ids",
        "open_index",
        "order",
        "pairing",
        "public",
        "seen_objects",
        "seen_other",
        "systems",
        "turn_tail",
        "turns",
    )

    def __init__(self) -> None:
        self.count = 0
        self.pairing: list[str] = []
        self.open_ids: set[str] = set()  # ids of the latest call message awaiting results
        self.open_index: int | None = None
        self.answered_ever: set[str] = set()
        self.duplicates: list[str] = []
        self.seen_objects: dict[int, int] = {}
        self.declared: dict[str, int] = {}
        self.order: list[str] = []
        self.public: list[str] = []
        self.misplaced: list[str] = []
        self.seen_other = False
        self.systems: list[Mapping[str, Any]] = []
        self.candidates: list[tuple[int, Mapping[str, Any]]] = []
        self.turn_tail: Shape | None = None
        self.last_human: int | None = None
        self.turns = TurnReader()
        """The view's turns as the provider reads them (``_turn_rule``)."""

    def copy(self) -> ViewScan:
        twin = ViewScan()
        for name in self.__slots__:
            value = getattr(self, name)
            copies = isinstance(value, list | set | dict | TurnReader)
            setattr(twin, name, value.copy() if copies else value)
        return twin

    def problems(self) -> list[str]:
        return self.pairing + self.duplicates + self.order + self.public + self.misplaced

    def feed(self, message: Mapping[str, Any], shape: Shape) -> None:
        index = self.count
        self.count += 1
        self._pair(index, shape)
        self._duplicates(index, message, shape)
        self.misplaced += (
            f"view[{index}]: a {kind} block in a {shape.role} message, where providers refuse it"
            for kind in shape.misplaced
        )
        if carries_public_marker(message):
            # Amplifier's public history is for display: no provider may be sent any of it.
            self.public.append(f"view[{index}]: carries a public-history metadata key")
        if shape.role == "system":
            self.systems.append(message)
            if self.seen_other and not self.order:
                self.order.append(f"view[{index}]: system message after a non-system message")
        else:
            self.seen_other = True
        if shape.human:
            before = self.turn_tail  # _turn_before(view, index)
            if before is not None and before.result:
                self.candidates.append((index, message))
            self.last_human = index
        # A typed prompt joins the user turn it follows as a reminder does (the provider merges
        # them), as the history's reading has it: a second prompt after a result is in the
        # result's round too.
        if not shape.merges and not shape.human:
            self.turn_tail = shape
        self.turns.feed(index, part_of(shape.role, result=shape.result, calls=bool(shape.calls)))

    def _pair(self, index: int, shape: Shape) -> None:
        if shape.results:
            for call_id in shape.results:
                if call_id in self.open_ids:
                    self.open_ids.discard(call_id)
                    self.answered_ever.add(call_id)
                elif call_id in self.answered_ever:
                    self.pairing.append(f"view[{index}]: second result for tool call {call_id!r}")
                else:
                    self.pairing.append(
                        f"view[{index}]: tool result {call_id!r} does not directly follow its call"
                    )
            return
        if self.open_ids and self.open_index is not None:
            self.pairing.append(
                f"view[{self.open_index}]: tool call(s) {sorted(self.open_ids)} have no result "
                f"before view[{index}]"
            )
            self.open_ids = set()
        if shape.calls:
            self.open_ids = set(shape.calls)
            self.open_index = index
        # An unanswered call at the very end is allowed: the orchestrator is still executing it.

    def _duplicates(self, index: int, message: Mapping[str, Any], shape: Shape) -> None:
        # Providers refuse a request in which a tool-call id repeats, even after the first use
        # was answered ("tool_use ids must be unique"); the view renames reused ids to avoid it.
        first = self.seen_objects.setdefault(id(message), index)
        if first != index:
            self.duplicates.append(
                f"view[{index}]: the same message object already appears at {first}"
            )
        for call_id in shape.calls:
            earlier = self.declared.setdefault(call_id, index)
            if earlier != index:
                self.duplicates.append(
                    f"view[{index}]: tool-call id {call_id!r} is already declared at {earlier}"
                )
        for call_id in shape.repeated:
            self.duplicates.append(f"view[{index}]: tool-call id {call_id!r} is declared twice")


def makes_calls(message: Mapping[str, Any]) -> bool:
    """Whether it declares calls, with usable ids or not (the view answers both)."""
    listed, in_blocks = raw_call_ids(message)
    return bool(listed or in_blocks)


def merges(role: object, human: bool, result: bool) -> bool:
    """Lifted out (a system message) or merged into the user turn around it (a user-role
    message no person typed: hook reminders, the compaction notice)."""
    return role == "system" or (role == "user" and not human and not result)
