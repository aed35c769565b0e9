"""The compaction notice: what it states and its text.

The notice tells the model that earlier conversation was compacted and what that did. Built
only from the sticky state (:func:`notice_figures`), so it stays byte-identical until the next
escalation; ``_render`` re-exports it with the view's other renderers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._decisions import CompactionStats, Decisions, EarlierNotice

__all__ = [
    "NOTICE_SOURCE",
    "LeftOutMap",
    "NoticeFigures",
    "notice",
    "notice_figures",
    "notice_message",
]

NOTICE_SOURCE = "context-compaction"
Message = dict[str, Any]


def notice(stats: CompactionStats, decisions: Decisions, verbosity: str) -> Message:
    """The compaction notice appended to the view's tail.

    Built only from the sticky state, so it stays byte-identical until the next escalation.
    """
    return notice_message(notice_figures(stats, decisions), verbosity)


def notice_figures(
    stats: CompactionStats, decisions: Decisions, *, with_map: bool = True
) -> NoticeFigures:
    """What the notice for ``decisions`` states (equal figures: the same notice).

    ``with_map``: with the lines of the escalation's map, which must have been made (a view
    showed the notice: ``_map_maker``); without, what the notice states besides its map.
    """
    order = stats.left_out_map
    return NoticeFigures(
        history_messages=stats.history_messages,
        removed=len(decisions.removed),
        truncated=len(decisions.truncated),
        stubbed=len(decisions.stubbed),
        relaxed=decisions.protection_relaxed,
        left_out_map=order.lines if with_map and order is not None else (),
    )


class LeftOutMap:
    """An escalation's map of what its view left out (``_left_out_map``): ordered at the
    escalation, made the first time a view shows it (``_map_maker``).

    What the order fixes is all that decides anything: the room the map may take (``bound``,
    counted whole in the notice's figure) and what it will be made from (the decisions, the
    history as long as it was, the notices that stood beside it). So a resume's walk, which
    re-makes every escalation of a long session but shows only the last view, decides the same
    without making any map but those its view shows. Once made, the lines are kept and what
    they were made from is let go (a chain of notices standing one beside the other would
    otherwise keep every older decisions alive).
    """

    __slots__ = ("_lines", "_recipe", "bound", "length")

    def __init__(
        self,
        decisions: Decisions,
        figures: NoticeFigures,
        shown: tuple[EarlierNotice, ...],
        *,
        bound: int,
        length: int,
    ) -> None:
        self.bound = bound
        """The tokens the map may take; the notice is counted with all of them."""
        self.length = length
        """The history's length at the escalation: the map is made as of then."""
        self._recipe: tuple[Decisions, NoticeFigures, tuple[EarlierNotice, ...]] | None = (
            decisions,
            figures,
            shown,
        )
        self._lines: tuple[str, ...] | None = None

    @property
    def made(self) -> bool:
        return self._lines is not None

    @property
    def lines(self) -> tuple[str, ...]:
        """The map's lines, the heading first (empty: nothing fitted)."""
        if self._lines is None:
            raise RuntimeError("the map of what was left out is read before it was made")
        return self._lines

    def recipe(self) -> tuple[Decisions, NoticeFigures, tuple[EarlierNotice, ...]]:
        """What the map is made from: the escalation's decisions, what its notice states
        besides the map, and the earlier notices standing beside it (their names are not
        listed again)."""
        if self._recipe is None:
            raise RuntimeError("the map of what was left out was made already")
        return self._recipe

    def keep(self, lines: tuple[str, ...]) -> None:
        """The map as made from ``recipe``."""
        self._lines, self._recipe = lines, None


@dataclass(frozen=True, slots=True)
class NoticeFigures:
    """The numbers a notice states (every one of them comes from sticky state)."""

    history_messages: int
    removed: int
    truncated: int
    stubbed: int
    relaxed: bool
    left_out_map: tuple[str, ...] = ()
    """The map's lines (``_left_out_map``): its cost is bounded apart (``map_bound``)."""

    @classmethod
    def largest(cls, history_messages: int) -> NoticeFigures:
        """Figures at least as long as any notice for a history this size can state (every
        count stated), without a map."""
        wide = 10 ** len(str(history_messages + 1000)) - 1
        return cls(wide, wide, wide, wide, relaxed=True)


def notice_message(figures: NoticeFigures, verbosity: str) -> Message:
    summary = "Earlier messages were compacted"
    # Only what happened is stated: "0 are left out" tells the model nothing.
    done = [
        f"{count} {what}"
        for count, what in (
            (figures.removed, "are left out"),
            (figures.truncated, "tool results shortened"),
            (figures.stubbed, "long messages reduced to a stub"),
        )
        if count
    ]
    if done:
        listed = done[0] if len(done) == 1 else ", ".join(done[:-1]) + " and " + done[-1]
        summary += f": of the first {figures.history_messages}, {listed}"
    lines = [
        summary + ".",
        "Work asked for earlier may already be done: check recent messages before repeating "
        "a step, and do not redo state-changing actions.",
    ]
    if figures.relaxed:
        lines.append(
            "The window is small: recent tool results were shortened or left out too. Read "
            "them again with narrower parameters; never re-run a tool that changes state."
        )
    if verbosity != "minimal":
        lines.append("Shortened results say so at their start.")
    if verbosity == "verbose":
        lines.append(
            "Removed turns are not visible to you any more; if a decision made in them "
            "matters, ask the user or re-derive it from files rather than guessing."
        )
    lines.extend(figures.left_out_map)
    body = "\n".join(lines)
    return {
        "role": "user",
        "content": f'<system-reminder source="{NOTICE_SOURCE}">\n{body}\n</system-reminder>',
        "metadata": {"source": NOTICE_SOURCE, "ephemeral": True},
    }
