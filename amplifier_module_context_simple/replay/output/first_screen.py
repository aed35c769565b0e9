"""The default report: one screen that answers what a user asks first.

Four parts, in the order a user asks: what the session cost, what compaction saved, what the
agent lost, and whether a provider would have refused anything. The settings, the budget
arithmetic, the window, compaction and drop tables and the notes are the full report's
(``replay --full``, :func:`.output.render_report`); the last line says so. Every figure here is
the one the full report and ``--json`` give, formatted by the same functions.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from ..engine.report import ReplayReport
from ..findings.evidence import by_compaction
from ..findings.records import not_recorded_text
from ..findings.refusals import RefusalReport, assess
from .evidence_output import evidence_rows, recorded_compaction_text
from .output import requests_table
from .report_rows import (
    cost_rows,
    intro_line,
    problem_lines,
    window_line,
)
from .table_fit import Column, fit_table

__all__ = ["FULL_FLAG", "render_first_screen"]

FULL_FLAG = "--full"
"""The flag that prints the whole report (the first screen's last line names it)."""

_PARTS = ("What it cost", "What compaction saved", "What the agent lost", "Refused")


def render_first_screen(console: Console, report: ReplayReport, *, show_requests: bool) -> None:
    """Print the first screen of ``report`` (the built-in example's fits 40 lines at 80
    columns: ``tests/replay/test_first_screen.py``)."""
    s, n = report.summary(), len(report.requests)
    console.print(intro_line(report))
    if n == 0:
        console.print("No assistant message, so no request was made: nothing to report.")
        return
    partial = not_recorded_text(
        report.not_recorded, n, recorded_any=bool(report.source.get("recorded_requests"))
    )
    if partial is not None:
        console.print(f"[yellow]{escape(partial)}[/]")
    console.print(window_line(report))
    refusals = assess(report)
    parts = [
        cost_rows(report, s),
        _saved_rows(report, s, n),
        _lost_rows(report, s),
        _refused_rows(refusals, s, n),
    ]
    rows: list[list[str]] = []
    for title, part in zip(_PARTS, parts, strict=True):
        rows += [["", ""], [f"[bold]{title}[/]", ""]]
        rows.extend([f"  {escape(label)}", escape(value)] for label, value in part)
    columns = [Column("", kind="word"), Column("", kind="text")]
    console.print(fit_table(columns, rows, box=None))
    for line in problem_lines(report):
        console.print(line)
    if show_requests:
        console.print(requests_table(report))
    console.print(
        f"[dim]Settings, the budget arithmetic, the window, compaction and drop tables and the "
        f"notes: {FULL_FLAG}. Every request: --requests or --json. One view: inspect --at N.[/]"
    )


def _saved_rows(report: ReplayReport, s: dict[str, Any], n: int) -> list[tuple[str, str]]:
    count = s["compactions"]
    levels = ""
    if count:
        last, deepest = s["final_level"], s["deepest_level"]
        levels = (
            f" (the last at level {last}"
            + ("" if deepest == last else f", the deepest {deepest}")
            + ")"
        )
    return [
        ("Compactions", f"{count:,}{levels}"),
        ("Tokens not sent, last request",
         f"{s['final_tokens_saved']:,} of the history's {s['history_tokens']:,}"),
        ("Tokens not sent, all requests", f"{s['tokens_saved']:,}"),
        ("Prefix-stable views", f"{s['prefix_stable_requests']:,} of {n:,} (cache kept)"),
        *_own_rows(report),
    ]  # fmt: skip


def _own_rows(report: ReplayReport) -> list[tuple[str, str]]:
    """The agent's own compactions, when its log records any: how many, and the first."""
    rework = report.rework
    if rework is None or not rework.recorded:
        return []
    first = recorded_compaction_text(rework.recorded[0])
    return [("The agent's own compactions", f"{len(rework.recorded):,}; the first {first}")]


def _lost_rows(report: ReplayReport, s: dict[str, Any]) -> list[tuple[str, str]]:
    # One row per figure of what the views took from the agent: what they still held (in
    # context), and what they held or their notice's map named (findable).
    rows = evidence_rows(s)
    spans = [
        e
        for e in by_compaction(report.evidence, [c.request for c in report.compactions])
        if e.first_loss_request is not None
    ]
    if spans:
        first = spans[0]
        rows.append((
            "Evidence lost",
            f"at {len(spans):,} of {len(report.compactions):,} compactions; first, request "
            f"{first.first_loss_request} used `{first.first_loss[0]}` that compaction "
            f"{first.compaction} had left out",
        ))  # fmt: skip
    thinking = sum(c.thinking_blocks_after_edit for c in report.compactions)
    if thinking:
        rows.append(
            ("Thinking lost", f"{thinking:,} blocks, where thinking is bound to its prompt")
        )
    if s["ingress_truncations"]:
        rows.append(("Tool results cut on arrival", f"{s['ingress_truncations']:,}"))
    rework = report.rework
    if rework is not None and rework.spans:
        document = rework.as_json()
        rows.append((
            "Rework (own compactions)",
            f"{document['repeated_calls']:,} repeated call(s), {document['tokens']:,} tokens",
        ))  # fmt: skip
    return rows


def _refused_rows(refusals: RefusalReport, s: dict[str, Any], n: int) -> list[tuple[str, str]]:
    if refusals.context_window is None:
        judged = "no window known: none judged above it"
    else:
        judged = (
            f"the {refusals.context_window:,}-token window, "
            f"{refusals.max_output_tokens or 0:,} output tokens asked for"
        )
    verdict = (
        f"{refusals.refused_views:,} of {n:,} views ({refusals.above_window:,} above the "
        f"window, {refusals.invalid:,} invalid)"
        if refusals.refused_views
        else f"none of {n:,} views"
    )
    return [
        ("Refused by a provider", f"{verdict}; {judged}"),
        ("Requests over the budget", f"{s['over_budget_requests']:,} of {n:,}"),
        ("Invalid views", f"{s['invalid_views']:,} of {n:,}"),
    ]
