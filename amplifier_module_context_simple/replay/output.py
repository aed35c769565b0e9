"""The command's tables: a replay's report, and one request's view (``inspect``)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._budget import SAFETY_MARGIN_TOKENS
from .engine import ReplayOutcome
from .host_check import HOST_CHECK_RUN
from .report import ReplayReport
from .settings_text import render_settings
from .view import ViewRow
from .window_report import render_window_report

__all__ = ["render_report", "render_view", "stdout_console"]


def render_report(console: Console, report: ReplayReport, *, show_requests: bool) -> None:
    s, src, n = report.summary(), report.source, len(report.requests)
    skipped = len(src.get("skipped_lines", []))
    console.print(
        f"[bold]Replayed[/] {escape(str(src.get('name')))}: {src.get('format')}, "
        f"{s['messages']:,} messages" + (f", {skipped} unusable line(s) skipped" if skipped else "")
    )
    if n == 0:
        console.print("No assistant message, so no request was made: nothing to report.")
        return
    render_settings(console, report)
    console.print(f"[bold]Budget[/]  {_budget_text(report)}")
    console.print(
        f"[bold]Trigger[/] {s['trigger_tokens']:,} tokens (compact_threshold "
        f"{report.config.compact_threshold} of the budget less the notice reserve); compaction "
        f"aims for target_usage {report.config.target_usage}"
    )
    console.print(
        f"[bold]Tokens[/]  the module's estimates, tokenizer family "
        f"{report.token_family or 'none given (conservative estimate; see --model)'}"
    )
    table = Table(title="Summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in (
        ("Requests (one before each assistant message)", f"{n:,}"),
        ("Compactions", f"{s['compactions']:,} (final level {s['final_level']})"),
        ("Budget used, max / mean", f"{s['max_utilisation']:.1%} / {s['mean_utilisation']:.1%}"),
        ("Largest view", f"{s['peak_view_tokens']:,} tokens"),
        ("History at the end", f"{s['messages']:,} messages, {s['history_tokens']:,} tokens"),
        ("Tokens saved, last request", f"{s['final_tokens_saved']:,}"),
        ("Tokens saved, all requests", f"{s['tokens_saved']:,}"),
        ("Prefix-stable views (replayed)", f"{s['prefix_stable_requests']:,} / {n:,}"),
        *_cache_rows(s),
        ("Valid views", f"{n - s['invalid_views']:,} / {n:,}" + _host_note(s)),
        ("Views over the budget", f"{s['over_budget_requests']:,}"),
        ("Tool results clipped at ingress", f"{s['ingress_truncations']:,}"),
    ):  # fmt: skip
        table.add_row(label, value)
    console.print(table)
    render_window_report(console, report, show_requests=show_requests)
    if report.compactions:
        console.print(_compactions_table(report))
    else:
        console.print("No compaction: every view stayed under the trigger.")
    if show_requests:
        console.print(_requests_table(report))
    bad = next((r for r in report.requests if not r.valid), None)
    if bad is not None:
        console.print(
            f"[red]First invalid view[/] (request {bad.request}): {escape(bad.violations[0])}"
        )
    if report.warnings:
        total = sum(report.warnings.values())
        first = escape(next(iter(report.warnings)))
        console.print(
            f"[yellow]The manager logged {total} warning(s)[/] (all in --json); first: {first}"
        )
    if not show_requests:
        console.print("[dim]Every request: --requests or --json. One view: inspect --at N.[/]")


def _cache_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The recorded session's cache, beside the replayed views' prefix stability."""
    if "cache_breaks" not in summary:
        return []
    share = summary["cache_read_share"]
    causes = ", ".join(f"{n} {c}" for c, n in summary["cache_break_causes"].items())
    return [
        ("Recorded input served from cache", "n/a" if share is None else f"{share:.1%}"),
        (
            "Recorded cache breaks",
            f"{summary['cache_breaks']:,}" + (f" ({causes})" if causes else ""),
        ),
    ]


def _host_note(summary: dict[str, Any]) -> str:
    """What "valid" covered: check_view always, the host's model only where it is installed."""
    if summary["host_check"] != HOST_CHECK_RUN:
        return f" (check_view only; host model check {summary['host_check']})"
    return f" (check_view + host model; host refused {summary['host_invalid_views']:,})"


def stdout_console() -> Console:
    console = Console(highlight=False)
    # Piped or captured output: wide enough that the tables do not wrap.
    return console if console.is_terminal else Console(highlight=False, width=150)


def _budget_text(report: ReplayReport) -> str:
    b = report.budget_event or {}
    text = f"{b.get('effective_budget', 0):,} tokens"
    if b.get("source") == "provider_defaults":
        text += (
            f" = simulated {b['context_window']:,}-token window - {b['reserved_output']:,} "
            f"reserved output - {SAFETY_MARGIN_TOKENS:,} margin (provider_defaults)"
        )
        if report.source.get("format") == "example" and not report.source.get("window_given"):
            text += (
                "\n        (the built-in example's default window; change it with --context-window)"
            )
    else:
        text += f" ({b.get('source')}: no provider window simulated; see --context-window)"
    if b.get("capped"):
        text += (
            f", capped by max_tokens {b.get('max_tokens'):,} ({_source_of(report, 'max_tokens')})"
        )
    return text


def _source_of(report: ReplayReport, name: str) -> str:
    """Where setting ``name`` came from (``session_settings``' labels), or "flag"."""
    for setting in report.source.get("settings", []):
        if setting.get("name") == name:
            return str(setting.get("source"))
    return "flag"


def _compactions_table(report: ReplayReport) -> Table:
    table = Table(title="Compactions", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("#", "request", "level", "view tokens before → after",
                 "messages before → after", "removed", "truncated", "stubbed"):  # fmt: skip
        table.add_column(name, justify="right")
    for i, c in enumerate(report.compactions, 1):
        table.add_row(
            str(i), str(c.request), str(c.level), f"{c.before_tokens:,} → {c.after_tokens:,}",
            f"{c.before_messages} → {c.after_messages}", str(c.removed), str(c.truncated),
            str(c.stubbed),
        )  # fmt: skip
    return table


def _requests_table(report: ReplayReport) -> Table:
    table = Table(title="Requests", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("request", "history msgs", "history tok", "view msgs", "view tok", "used",
                 "level", "left out", "shortened", "stubs", "notice", "ok"):  # fmt: skip
        table.add_column(name, justify="right")
    for r in report.requests:
        flags = ("" if r.valid else "INVALID ") + ("" if r.prefix_stable else "new prefix")
        table.add_row(
            f"{r.request}{'*' if r.compacted else ''}", str(r.history_messages),
            f"{r.history_tokens:,}", str(r.view_messages), f"{r.view_tokens:,}",
            f"{r.utilisation:.0%}", str(r.level), str(r.left_out), str(r.shortened),
            str(r.stubs), "yes" if r.notice else "", flags or "ok",
        )  # fmt: skip
    table.caption = "* compaction at this request; ok: view valid and prefix-stable"
    return table


def render_view(
    console: Console, outcome: ReplayOutcome, rows: list[ViewRow], left_out: list[int], at: int
) -> None:
    record = outcome.report.requests[at - 1]
    from_history = sum(1 for row in rows if row.position is not None)
    added = len(rows) - from_history
    console.print(
        f"[bold]Request {at}[/] (before history message {record.at_message}): "
        f"{from_history} of {record.history_messages} history messages"
        + (f" + {added} added by the view" if added else "")
        + f", ~{record.view_tokens:,} tokens = "
        f"{record.utilisation:.1%} of the {record.budget:,}-token budget; compaction level "
        f"{record.level}; view {'valid' if record.valid else 'INVALID'}"
        + ("" if record.host_valid is not None else " (host model check not run)")
    )
    table = Table(
        caption="hist: position in the history (0-based); blank: added by the view",
        box=box.SIMPLE_HEAD,
    )
    for name, width in (("#", 3), ("hist", 5), ("tokens", 7), ("chars", 7)):
        table.add_column(name, justify="right", no_wrap=True, min_width=width)
    table.add_column("role", no_wrap=True, min_width=9)
    table.add_column("markers", no_wrap=True)
    table.add_column("tool call ids", no_wrap=True)
    table.add_column("content", no_wrap=True, overflow="ellipsis", max_width=36)
    for row in rows:
        table.add_row(
            str(row.index), "" if row.position is None else str(row.position),
            f"{row.tokens:,}", f"{row.chars:,}", row.role, escape(", ".join(row.markers)),
            escape("\n".join(row.tool_call_ids)), escape(row.preview),
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
