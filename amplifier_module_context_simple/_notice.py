"""The compaction notice: what it states and its text.

The notice tells the model that earlier conversation was compacted and what that did. Built
only from the sticky state (:func:`notice_figures`), so it stays byte-identical until the next
escalation; ``_render`` re-exports it with the view's other renderers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._decisions import CompactionStats, Decisions

__all__ = ["NOTICE_SOURCE", "NoticeFigures", "notice", "notice_figures", "notice_message"]

NOTICE_SOURCE = "context-compaction"
Message = dict[str, Any]


def notice(stats: CompactionStats, decisions: Decisions, verbosity: str) -> Message:
    """The compaction notice appended to the view's tail.

    Built only from the sticky state, so it stays byte-identical until the next escalation.
    """
    return notice_message(notice_figures(stats, decisions), verbosity)


def notice_figures(stats: CompactionStats, decisions: Decisions) -> NoticeFigures:
    """What the notice for ``decisions`` states (equal figures: the same notice)."""
    return NoticeFigures(
        history_messages=stats.history_messages,
        removed=len(decisions.removed),
        truncated=len(decisions.truncated),
        stubbed=len(decisions.stubbed),
        relaxed=decisions.protection_relaxed,
        left_out_map=stats.left_out_map,
    )


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
