"""The compaction notice: what it states and its text.

The notice tells the model that earlier conversation was compacted and what that did. Built
only from the sticky state (:func:`notice_figures`), so it stays byte-identical until the next
escalation; ``_render`` re-exports it with the view's other renderers.
"""

from __future__ import annotations

from typing import Any

from ._decisions import CompactionStats, Decisions, NoticeFigures

__all__ = [
    "NOTICE_SOURCE",
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


def notice_message(figures: NoticeFigures, verbosity: str) -> Message:
    summary = "Earlier messages were compacted"
    # Only what happened is stated: "0 are left out" tells the model nothing.
    done = [
        f"{count} {one if count == 1 else many}"
        for count, one, many in (
            (figures.removed, "is left out", "are left out"),
            (figures.truncated, "tool result shortened", "tool results shortened"),
            (figures.stubbed, "long message reduced to a stub", "long messages reduced to a stub"),
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
