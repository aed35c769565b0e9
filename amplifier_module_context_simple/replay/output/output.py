"""The command's tables: a replay's report, and one request's view (``inspect``).

Every table fits the console it is printed on by :mod:`.table_fit`'s rule (figures and headers
whole, optional columns left out and named). Output that is not a terminal is as wide as
``COLUMNS`` says, else Rich's default of 80.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.markup import escape

from ..engine.engine import ReplayOutcome
from ..engine.host_check import HOST_CHECK_RUN
from ..engine.report import ReplayReport
from ..engine.session_analysis import BASIS_GIVEN, BASIS_PAYLOAD
from ..engine.view import ViewRow
from ..findings.records import levels_text, not_recorded_text
from ..findings.refusals import assess
from .budget_text import budget_text, trigger_note
from .evidence_output import evidence_rows
from .report_rows import (
    intro_line,
    problem_lines,
    recorded_cost_rows,
    simulated_cost_rows,
)
from .row_caps import capped_rows, freed
from .settings_text import render_settings
from .table_fit import Column, fit_table
from .window_report import render_window_report

__all__ = ["render_report", "render_view", "requests_table", "stdout_console"]


def render_report(console: Console, report: ReplayReport, *, show_requests: bool) -> None:
    s, src, n = report.summary(), report.source, len(report.requests)
    console.print(intro_line(report))
    if n == 0:
        console.print("No assistant message, so no request was made: nothing to report.")
        return
    recorded_any = bool(src.get("recorded_requests"))
    partial = not_recorded_text(report.not_recorded, n, recorded_any=recorded_any)
    if partial is not None:
        console.print(f"[yellow]{escape(partial)}[/]")
    render_settings(console, report)
    console.print(f"[bold]Budget[/]  {budget_text(report)}")
    console.print(
        f"[bold]Trigger[/] {s['trigger_tokens']:,} tokens of view, its notice aside "
        f"(compact_threshold {report.config.compact_threshold} of the budget less the notice "
        f"reserve); compaction aims for target_usage {report.config.target_usage}"
    )
    why = trigger_note(report)
    if why is not None:
        console.print(f"        [dim]{escape(why)}[/]")
    console.print(
        f"[bold]Tokens[/]  the module's estimates, tokenizer family "
        f"{report.token_family or 'none given (conservative estimate; see --model)'}"
    )
    pairs = [
        ("Requests (before each assistant message)", f"{n:,}"),
        ("Compactions", _compactions_text(s)),
        ("Budget used (whole request), max / mean",
         f"{s['max_utilisation']:.1%} / {s['mean_utilisation']:.1%} of {s['request_budget']:,}"),
        ("Largest request (view + overhead)", f"{s['peak_request_tokens']:,} tokens"),
        ("Largest view", f"{s['peak_view_tokens']:,} tokens"),
        ("History at the end", f"{s['messages']:,} messages, {s['history_tokens']:,} tokens"),
        ("Tokens not sent, last request", f"{s['final_tokens_saved']:,}"),
        ("Tokens not sent, summed over requests", f"{s['tokens_saved']:,}"),
        ("Prefix-stable views (replayed)", f"{s['prefix_stable_requests']:,} / {n:,}"),
        *recorded_cost_rows(report, s),
        *simulated_cost_rows(report), *evidence_rows(s),
        ("Valid views", f"{n - s['invalid_views']:,} / {n:,}" + _host_note(s)),
        ("Requests over the budget", f"{s['over_budget_requests']:,}" + _refused_note(report)),
        ("Tool results cut on arrival", f"{s['ingress_truncations']:,}"),
    ]  # fmt: skip
    # The labels stay whole; the values wrap between words. Where that leaves the values too
    # little room the table becomes a list, each value after its label.
    columns = [
        Column("", kind="word"),
        Column("", kind="text", floor=_VALUE_FLOOR, justify="right"),
    ]
    rows = [[f"[bold]{escape(label)}[/]", escape(value)] for label, value in pairs]
    console.print(fit_table(columns, rows, title="Summary", box=box.SQUARE))
    console.print(f"[dim]{_whole_request_note(report)}[/]")
    console.print(
        "[dim]Tokens not sent: each request's history less its view; the sum over the requests "
        "is what re-sending the whole history every time would have added to the input.[/]"
    )
    for note in _summary_words(s):
        console.print(f"[dim]{note}[/]")
    if s["refused_within_budget"]:
        console.print(f"[yellow]{_stricter_text(report, s['refused_within_budget'])}[/]")
    render_window_report(console, report, show_requests=show_requests)
    if report.compactions:
        console.print(_compactions_table(report))
        console.print(f"[dim]{escape(levels_text())}[/]")
    else:
        console.print("No compaction: every view stayed under the trigger.")
    if show_requests:
        console.print(requests_table(report))
    for line in problem_lines(report):
        console.print(line)
    if not show_requests:
        console.print("[dim]Every request: --requests or --json. One view: inspect --at N.[/]")


def _host_note(summary: dict[str, Any]) -> str:
    """What "valid" covered: the module's own check always, the host's message model only
    where amplifier-core is installed."""
    if summary["host_check"] != HOST_CHECK_RUN:
        return f" (the module's own check only; amplifier-core's model {summary['host_check']})"
    return (
        " (the module's own check and amplifier-core's message model; the model refused "
        f"{summary['host_invalid_views']:,})"
    )


def _summary_words(summary: dict[str, Any]) -> list[str]:
    """One line per term of the Summary a reader cannot know, for the rows it has."""
    words = [
        "Prefix-stable: the view begins with the whole view before it, so a provider's prompt "
        "cache can serve that much again.",
        "Tool results cut on arrival: results longer than max_tool_result_bytes, stored cut "
        "(the view never sends more of them).",
    ]
    if "priced_input_tokens" in summary or summary.get("simulated_cache"):
        words.append(
            "Priced: input tokens weighted by their price, in tokens at the model's base input "
            "price (a cache read counts 0.1, a cache write 1.25); dollars from a dated price "
            "table. At the markers: a cache that keeps entries only where a request carries "
            "cache_control markers, as Anthropic's does; the replay puts them where Amplifier's "
            "provider does (the last tool definition, the system prompt and the last message), "
            "a bare transcript's views included."
        )
    return words


class _StdoutConsole(Console):
    def on_broken_pipe(self) -> None:
        # Rich would exit with status 1; the command's error layer treats a reader that went
        # away (`| head -1`) as a success.
        raise BrokenPipeError


def stdout_console() -> Console:
    # Rich takes the width from the terminal, else from COLUMNS, else 80: the tables fit it.
    return _StdoutConsole(highlight=False)


_CONTENT_WIDTH = 36
"""The most the view's content preview takes."""
_VALUE_FLOOR = 30
"""The Summary's values get at least this beside labels that never wrap; below, a list."""


def _whole_request_note(report: ReplayReport) -> str:
    """What "the whole request" covered and the two limits it was held to: the budget's (the
    summary) and the provider's (--check)."""
    basis = report.window_basis
    if any(w.comparison is not None and not w.recorded for w in report.windows):
        what = (
            "the provider's recorded usage where the replayed view is the conversation the log "
            "sent, else the replayed view + what that usage counted beyond the messages sent"
        )
    elif basis == BASIS_PAYLOAD:
        what = (
            "the replayed view (its system prompt included) + the recorded tool definitions "
            "and injections"
        )
    elif basis == BASIS_GIVEN:
        what = "the replayed view + the --overhead given"
    else:
        what = "the replayed view alone (no payload recorded, no --overhead given)"
    last = report.requests[-1]
    text = f"Whole request: {what}, held to the {last.request_budget:,}-token request budget"
    window = report.window
    if window is None:
        return text + "; no window known, so --check judges none above it"
    return (
        f"{text}; --check holds it + the {window.max_output_tokens:,} output tokens asked for "
        f"to the {window.context_window:,}-token window"
    )


def _refused_note(report: ReplayReport) -> str:
    if report.window is None:
        return ""
    above = sum(v.above_window for v in assess(report).refused)
    return f" (above the window: {above:,})"


def _stricter_text(report: ReplayReport, count: int) -> str:
    """Where the provider's rule is stricter than the budget: the output it reserves."""
    window = report.window
    asked = window.max_output_tokens if window is not None else 0
    held = (report.budget_event or {}).get("reserved_output", 0)
    why = (
        f"output_reserve_fraction {report.config.output_reserve_fraction}"
        if report.config.output_reserve_fraction < 1
        else "the budget keeps a quarter of the window for the input"
    )
    return (
        f"{count:,} request(s) within the budget are above the window: the provider reserves "
        f"the {asked:,} output tokens it is asked for, the budget held back {held:,} ({why})"
    )


def _compactions_text(summary: dict[str, Any]) -> str:
    count = summary["compactions"]
    if not count:
        return "0"
    last, deepest = summary["final_level"], summary["deepest_level"]
    levels = f"level {last}" + ("" if deepest == last else f", the deepest {deepest}")
    return f"{count:,} (the last at {levels})"


def _compactions_table(report: ReplayReport) -> RenderableType:
    columns = [
        Column("#"), Column("request"), Column("level"),
        Column("view tokens\nbefore → after"), Column("messages\nbefore → after", drop=3),
        Column("removed"), Column("truncated", drop=2), Column("stubbed", drop=1),
        Column("where", kind="word", drop=4), Column("thinking\nlost", drop=5),
    ]  # fmt: skip
    rows, more = capped_rows(report.compactions, freed, lambda i, c: [
        str(i), str(c.request), str(c.level), f"{c.before_tokens:,} → {c.after_tokens:,}",
        f"{c.before_messages} → {c.after_messages}", str(c.removed), str(c.truncated),
        str(c.stubbed), "turn start" if c.at_turn_start else "in a loop",
        str(c.thinking_blocks_after_edit),
    ], what="compactions")  # fmt: skip
    where = (
        "where: at a turn's first request (only finished turns' reasoning is lost) or inside "
        "a tool loop (the active turn loses its own); thinking lost: thinking blocks after the "
        "edit, which a model whose thinking is bound to its prompt drops"
    )
    return fit_table(
        columns, rows, title="Compactions", caption=where if more is None else f"{where}; {more}"
    )


def requests_table(report: ReplayReport) -> RenderableType:
    columns = [
        Column("request"), Column("history\nmsgs", drop=3), Column("history\ntok", drop=5),
        Column("view\nmsgs", drop=4), Column("view\ntok"), Column("request\ntok", drop=8),
        Column("used"),
        Column("level"), Column("left\nout", drop=6), Column("shortened", drop=2),
        Column("stubs", drop=1), Column("notice", kind="word", drop=7),
        Column("ok", kind="word"),
    ]  # fmt: skip
    rows: list[list[str]] = []
    for r in report.requests:
        flags = "\n".join(
            f for f, on in (("INVALID", not r.valid), ("new prefix", not r.prefix_stable)) if on
        )
        rows.append([
            f"{r.request}{'*' if r.compacted else ''}", str(r.history_messages),
            f"{r.history_tokens:,}", str(r.view_messages), f"{r.view_tokens:,}",
            f"{r.request_tokens:,}", f"{r.utilisation:.0%}", str(r.level), str(r.left_out),
            str(r.shortened), str(r.stubs), "yes" if r.notice else "", flags or "ok",
        ])  # fmt: skip
    return fit_table(
        columns, rows, title="Requests",
        caption="* compaction at this request; used: the whole request (request tok) of the "
        "request budget; ok: view valid and prefix-stable",
    )  # fmt: skip


def render_view(
    console: Console, outcome: ReplayOutcome, rows_in: list[ViewRow], left_out: list[int], at: int
) -> None:
    record = outcome.report.requests[at - 1]
    from_history = sum(1 for row in rows_in if row.position is not None)
    added = len(rows_in) - from_history
    console.print(
        f"[bold]Request {at}[/] (before history message {record.at_message}): "
        f"{from_history} of {record.history_messages} history messages"
        + (
            f" (from message {outcome.history_start} on: the agent's own compaction started "
            "its history there)"
            if outcome.history_start
            else ""
        )
        + (f" + {added} added by the view" if added else "")
        + f", ~{record.view_tokens:,} tokens (budget {record.budget:,}); the whole request "
        f"~{record.request_tokens:,} = {record.utilisation:.1%} of its {record.request_budget:,}"
        "-token budget; compaction level "
        f"{record.level}; view {'valid' if record.valid else 'INVALID'}"
        + ("" if record.host_valid is not None else " (host model check not run)")
    )
    columns = [
        Column("#"), Column("hist"), Column("tokens"), Column("chars", drop=2),
        Column("role", kind="word"), Column("markers", kind="word", drop=3),
        Column("tool call ids", kind="word", drop=1),
        Column("content", kind="preview", ceiling=_CONTENT_WIDTH),
    ]  # fmt: skip
    rows = [
        [
            str(row.index), "" if row.position is None else str(row.position),
            f"{row.tokens:,}", f"{row.chars:,}", row.role, escape("\n".join(row.markers)),
            escape("\n".join(row.tool_call_ids)), escape(row.preview),
        ]
        for row in rows_in
    ]  # fmt: skip
    table = fit_table(
        columns, rows,
        caption="hist: position in the history (0-based); blank: added by the view; chars: "
        "text plus tool-call arguments",
    )  # fmt: skip
    console.print(table)
    console.print(f"Left out of this view ({len(left_out)}): {_ranges(left_out) or 'nothing'}")
    for violation in record.violations:
        console.print(f"[red]violation:[/] {escape(violation)}")


def _ranges(positions: list[int]) -> str:
    parts: list[str] = []
    for p in positions:
        if parts and parts[-1].split("-")[-1] == str(p - 1):
            parts[-1] = parts[-1].split("-")[0] + f"-{p}"
        else:
            parts.append(str(p))
    return ", ".join(parts)
