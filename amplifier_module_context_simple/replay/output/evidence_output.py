"""The text report of what the agent lost: evidence kept, per compaction, and rework after the
session's own compactions (``evidence``, ``rework``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..engine.report import ReplayReport
from ..findings.evidence import CompactionEvidence, by_compaction
from ..findings.rework import Rework
from ..recordings.recorded_log import LogCompaction
from .row_caps import largest, more_text

__all__ = ["evidence_rows", "recorded_compaction_text", "render_evidence"]

SHOWN_STRINGS = 3
"""Strings named per line (the rest are counted; all are in --json)."""


def evidence_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The Summary table's rows: of what the next calls used, the share the views showed
    (*in context*) and the share they showed or their map of what was left out named
    (*findable*)."""
    used, kept, share = (
        summary["evidence_used"],
        summary["evidence_kept"],
        summary["evidence_kept_share"],
    )
    if share is None:
        return [("Evidence in context", "nothing the calls used came from earlier results")]
    findable, findable_share = summary["evidence_findable"], summary["evidence_findable_share"]
    return [
        ("Evidence in context", _share(share, kept, used)),
        ("Evidence findable", _share(findable_share, findable, used)),
    ]


def _share(share: float, part: int, whole: int) -> str:
    return f"{share:.1%} ({part:,} of {whole:,} strings)"


def _named(strings: Sequence[str]) -> str:
    shown = ", ".join(f"`{s}`" for s in strings[:SHOWN_STRINGS])
    more = len(strings) - SHOWN_STRINGS
    return shown + (f" and {more} more" if more > 0 else "")


def render_evidence(console: Console, report: ReplayReport) -> None:
    """Per compaction whose views lost something the agent then used, the first such loss;
    then the rework after the session's own compactions, when it had any."""
    spans = [
        e
        for e in by_compaction(report.evidence, [c.request for c in report.compactions])
        if e.first_loss_request is not None
    ]
    if spans:
        console.print(
            "[bold]Evidence lost[/] (strings the next calls used that earlier results or "
            "prompts held, no longer in the view):"
        )
        shown = largest(spans, lambda e: e.lost_uses)
        for e in shown:
            console.print("  " + escape(_lost_line(e)))
        if len(shown) < len(spans):
            console.print(f"  [dim]{more_text(len(spans) - len(shown), 'compactions')}[/]")
    if report.rework is not None:
        _render_rework(console, report.rework)


def recorded_compaction_text(c: LogCompaction) -> str:
    """One of the agent's own compactions: after which request, what triggered it, how big
    the conversation was before it."""
    trigger = c.trigger or "trigger not recorded"
    before = (
        f"{c.tokens_before:,} tokens before"
        if c.tokens_before is not None
        else "tokens before not recorded"
    )
    return f"after request {c.after_request}: {trigger}, {before}"


def _render_recorded(console: Console, rework: Rework) -> None:
    """The agent's own compactions as its log records them (the log may end on one)."""
    console.print(
        f"[bold]The agent's own compactions[/] ({escape(rework.source)}): {len(rework.recorded)}"
    )
    for c in rework.recorded[:SHOWN_STRINGS]:
        when = f", {c.timestamp}" if c.timestamp else ""
        console.print("  " + escape(recorded_compaction_text(c) + when))
    if len(rework.recorded) > SHOWN_STRINGS:
        console.print(f"  [dim]{more_text(len(rework.recorded) - SHOWN_STRINGS, 'compactions')}[/]")


def _lost_line(e: CompactionEvidence) -> str:
    first = len(e.first_loss)
    also = f" ({e.lost_uses - first} more use(s) by later requests)" if e.lost_uses > first else ""
    return (
        f"compaction {e.compaction} (request {e.request}) left out what request "
        f"{e.first_loss_request} then used: {_named(e.first_loss)}{also}"
    )


def _render_rework(console: Console, rework: Rework) -> None:
    document = rework.as_json()
    if rework.recorded:
        _render_recorded(console, rework)
    if not rework.spans and rework.recorded:
        console.print(
            "[bold]Rework[/] none to count: no request followed the agent's own compaction(s)"
        )
        return
    if not rework.spans:
        console.print(
            "[bold]Rework[/] none to count: the recording shows no compaction of the session's "
            f"own ({escape(rework.source)} looked for)"
        )
        return
    usd = document["usd"]
    cost = f"{document['priced_tokens']:,.0f} base-price tokens" + (
        f", ${usd:,.4f}" if usd is not None else ""
    )
    console.print(
        f"[bold]Rework after the session's own compactions[/] ({escape(rework.source)}): "
        f"{document['repeated_calls']:,} repeated call(s) after {len(rework.spans)} "
        f"compaction(s), {document['tokens']:,} tokens of results read again ({cost})"
    )
    repeating = [span for span in rework.spans if span.repeated]
    shown = largest(repeating, lambda span: span.tokens)
    for span in shown:
        calls = ", ".join(f"`{r.tool} {r.argument}`" for r in span.repeated[:SHOWN_STRINGS])
        more = len(span.repeated) - SHOWN_STRINGS
        console.print(
            "  "
            + escape(
                f"after request {span.request}: {len(span.repeated)} of {span.calls} call(s) "
                f"repeat earlier ones, {span.tokens:,} tokens: {calls}"
                + (f" and {more} more" if more > 0 else "")
            )
        )
    if len(shown) < len(repeating):
        console.print(f"  [dim]{more_text(len(repeating) - len(shown), 'compactions')}[/]")
