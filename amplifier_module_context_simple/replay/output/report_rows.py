"""The lines and rows the first screen and the full report share, written once.

The report's opening line, the window it was judged against (and where that figure came
from, a guess called one), what the session cost (recorded and replayed input, priced), and
the manager's warnings. Each share is formatted once, from the unrounded figure, so a figure
reads the same wherever the report prints it.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from ..engine.report import ReplayReport
from ..provider.replay_cache import PRICED_BASIS

__all__ = [
    "cost_rows",
    "intro_line",
    "problem_lines",
    "recorded_cost_rows",
    "share_text",
    "simulated_cost_rows",
    "warnings_line",
    "window_line",
]


def share_text(share: float | None) -> str:
    """A share as every table prints it: one decimal of a percent, rounded once."""
    return "n/a" if share is None else f"{share:.1%}"


def intro_line(report: ReplayReport) -> str:
    src, s = report.source, report.summary()
    skipped = len(src.get("skipped_lines", []))
    return (
        f"[bold]Replayed[/] {escape(str(src.get('name')))}: {src.get('format')}, "
        f"{s['messages']:,} messages" + (f", {skipped} unusable line(s) skipped" if skipped else "")
    )


def window_line(report: ReplayReport) -> str:
    """The window the views were judged against, where it came from, and the budget."""
    budget = report.requests[-1].request_budget if report.requests else 0
    window = report.window
    if window is None:
        return (
            f"[bold]No window known[/]: the budget, {budget:,} tokens, is max_tokens_fallback "
            "(a guess; give --context-window or --model)"
        )
    return (
        f"[bold]Window[/] {window.context_window:,} tokens ({escape(_window_source(report))}), "
        f"{window.max_output_tokens:,} of them for the output; budget {budget:,} tokens for "
        "the whole request"
    )


def _window_source(report: ReplayReport) -> str:
    for setting in report.source.get("settings") or []:
        if setting.get("name") == "context_window":
            source = str(setting.get("source"))
            break
    else:
        source = "default"
    if report.source.get("format") == "example" and source == "default":
        return "the built-in example's; see --context-window"
    if source == "default":
        return "a guess: no model or window recorded; see --context-window"
    return f"from the {source}" if source != "flag" else "given"


def recorded_cost_rows(report: ReplayReport, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """What the recorded session's own requests cost, by the provider's usage."""
    cache = report.cache
    if cache is None:
        return []
    causes = ", ".join(f"{n} {c}" for c, n in summary["cache_break_causes"].items())
    rows = [
        ("Recorded input served from cache", share_text(cache.share)),
        (
            "Recorded cache breaks",
            f"{summary['cache_breaks']:,}" + (f" ({causes})" if causes else ""),
        ),
    ]
    priced = summary.get("priced_input_tokens")
    if priced is not None:
        dollars = summary.get("input_usd")
        caused = summary.get("break_cost_share")
        text = f"{priced:,.0f} base-price tokens" + (
            "" if dollars is None else f" (${dollars:,.2f})"
        )
        if caused is not None:
            text += f"; the breaks caused {caused:.1%} of it"
        rows.append(("Recorded input, priced", text))
    return rows


def simulated_cost_rows(report: ReplayReport) -> list[tuple[str, str]]:
    """The replayed views priced through a simulated provider cache."""
    simulated = report.simulated_cost
    if simulated is None:
        return []
    document = simulated.as_json()
    dollars = document["input_usd"]
    text = f"{document['priced_input_tokens']:,.0f} base-price tokens"
    text += "" if dollars is None else f" (${dollars:,.2f})"
    if simulated.read_share is not None:
        text += f", {share_text(simulated.read_share)} read from the simulated cache"
    text += f"; {document['priced_input_tokens_at_markers']:,.0f} if cached only at the markers"
    if document["times_assumed"]:
        text += " (requests counted a minute apart)"
    if report.cache is not None:  # beside the recorded price: say what each one covers
        text += f". Priced: {PRICED_BASIS}"
    return [("Replayed input, priced (simulated cache)", text)]


_SHORT_LABELS = {
    "Recorded input served from cache": "Recorded, from cache",
    "Recorded cache breaks": "Recorded cache breaks",
    "Recorded input, priced": "Recorded input, priced",
    "Replayed input, priced (simulated cache)": "Replayed input, priced",
}
"""The first screen's narrower labels for the full report's cost rows."""


def cost_rows(report: ReplayReport, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The first screen's cost: requests, the largest, and the input priced both ways."""
    n = len(report.requests)
    priced = [*recorded_cost_rows(report, summary), *simulated_cost_rows(report)]
    return [
        ("Requests", f"{n:,}, one before each assistant message"),
        (
            "Largest request",
            f"{summary['peak_request_tokens']:,} tokens, {summary['max_utilisation']:.1%} of "
            f"the {summary['request_budget']:,}-token budget",
        ),
        *((_SHORT_LABELS.get(label, label), value) for label, value in priced),
    ]


def problem_lines(report: ReplayReport) -> list[str]:
    """The first invalid view and the manager's warnings, when there are any (both screens
    print them under their tables)."""
    lines: list[str] = []
    bad = next((r for r in report.requests if not r.valid), None)
    if bad is not None:
        lines.append(
            f"[red]First invalid view[/] (request {bad.request}): {escape(bad.violations[0])}"
        )
    warned = warnings_line(report)
    if warned is not None:
        lines.append(warned)
    return lines


def warnings_line(report: ReplayReport) -> str | None:
    if not report.warnings:
        return None
    total = sum(report.warnings.values())
    first = escape(next(iter(report.warnings)))
    return f"[yellow]The manager logged {total} warning(s)[/] (all in --json); first: {first}"
