"""The tables of what the views dropped, what a provider would refuse, and a sweep's rows.

They fit the console by :mod:`.table_fit`'s rule: figures whole, the tool and first line end in
an ellipsis, optional columns left out (and named) in the order declared here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from ... import estimate_message_tokens
from ..engine.report import ReplayReport
from ..engine.sweep import SHARE_OF_WINDOW, SWEPT_KEYS, SweepRow
from ..findings.drops import LEFT, Drop, PositionIndex, call_text, first_line
from ..findings.records import not_recorded_check_text
from ..findings.refusals import STORM_MIN, STREAK_MIN, RefusalReport
from ..provider.replay_cache import PRICED_BASIS
from .row_caps import largest, more_text
from .table_fit import Cell, Column, Note, fit_table

__all__ = [
    "DROP_ROWS",
    "LEFT_OUT_ROWS",
    "REFUSED_ROWS",
    "render_drops",
    "render_left_out",
    "render_refusals",
    "render_sweep",
    "render_why",
]

DROP_ROWS = 5
"""Rows shown per request in the drops table (the largest first); ``--json`` has them all."""
LEFT_OUT_ROWS = 20
REFUSED_ROWS = 10
_CALL_WIDTH = 36
"""The most the call column takes before it wraps (between words, so a path stays whole while
it fits); the first line gets the rest."""
_CALL_FLOOR = 12
"""The call column's narrowest: below it a path folds."""
_LINE_FLOOR = 12
"""The first line's narrowest before an optional column is left out for it."""


def _call_column() -> Column:
    """The call behind a tool output (or the tools a call makes): the tool and its main argument."""
    return Column("call", kind="text", floor=_CALL_FLOOR, ceiling=_CALL_WIDTH)


def _line_column() -> Column:
    return Column("first line", kind="preview", floor=_LINE_FLOOR)


def _tokens(d: Drop) -> str:
    return f"{d.tokens_before:,} → {d.tokens_after:,}"


def render_drops(console: Console, report: ReplayReport) -> None:
    """Per request that changed the history's place in the view: the largest changes."""
    if not report.drops:
        return
    by_request: dict[int, list[Drop]] = {}
    for d in report.drops:
        by_request.setdefault(d.request, []).append(d)
    # Left out first: the change (the tokens say it, "→ 0" left out, and the role tells a
    # stub), then the level (the compactions table has it).
    columns = [
        Column("req"), Column("pos"), Column("change", kind="word", drop=1),
        Column("role", kind="word"), _call_column(), Column("tokens"), Column("level", drop=2),
        _line_column(),
    ]  # fmt: skip
    rows: list[list[Cell]] = []
    ends: set[int] = set()
    shown_requests = largest(list(by_request), lambda r: _removed(by_request[r]))
    for request in shown_requests:
        drops = by_request[request]
        shown = sorted(drops, key=lambda d: (-d.tokens_before, d.position))[:DROP_ROWS]
        for i, d in enumerate(shown):
            mark = "" if d.compacted else "°"  # left out with no compaction at the request
            rows.append([
                f"{request}{mark}" if i == 0 else "", str(d.position), d.change, d.role,
                escape(call_text(d.tool, d.call_argument)), _tokens(d), str(d.level),
                escape(d.first_line),
            ])  # fmt: skip
        if len(drops) > len(shown):
            more = Note(f"… {len(drops) - len(shown)} more ({_counts(drops)})")
            rows.append(["", "", "", "", more, "", "", ""])  # the call column: the widest text
        ends.add(len(rows) - 1)
    if len(shown_requests) < len(by_request):
        hidden = more_text(len(by_request) - len(shown_requests), "requests that dropped")
        rows.append(["", "", "", "", Note(hidden), "", "", ""])
    caption = None
    if any(not d.compacted for d in report.drops):
        caption = "° no compaction at that request: a pairing repair left the message out"
    title = "What each compaction dropped (largest first; all in --json)"
    console.print(fit_table(columns, rows, title=title, caption=caption, section_ends=ends))


def _removed(drops: Sequence[Drop]) -> int:
    return sum(d.tokens_before - d.tokens_after for d in drops)


def _counts(drops: Sequence[Drop]) -> str:
    found: dict[str, int] = {}
    for d in drops:
        found[d.change] = found.get(d.change, 0) + 1
    return ", ".join(f"{n} {change}" for change, n in found.items())


def render_refusals(console: Console, refusals: RefusalReport) -> None:
    """The headline: views a provider would refuse, streaks, storms, repairs."""
    n = refusals.requests
    if refusals.context_window is None:
        window = "no window known, so views above it are not judged (see --context-window)"
    else:
        window = (
            f"judged against the {refusals.context_window:,}-token window with "
            f"{refusals.max_output_tokens or 0:,} output tokens requested"
        )
    verdict = (
        f"[red]{refusals.refused_views:,} of {n:,} views[/] ({refusals.above_window:,} above "
        f"the window, {refusals.invalid:,} invalid)"
        if refusals.refused_views
        else f"none of {n:,} views"
    )
    console.print(f"[bold]Refused by a provider[/] {verdict}; {window}")
    unjudged = not_recorded_check_text(refusals.not_recorded, n)
    if unjudged is not None:
        console.print(f"[yellow]Not judged whole[/]: {escape(unjudged)}")
    streak, storm = refusals.longest_over_budget, refusals.longest_compaction_run
    console.print(
        "[bold]Over-budget streak[/] "
        + (
            f"[yellow]{streak.length} consecutive requests ({streak.first_request}-"
            f"{streak.last_request})[/]"
            if refusals.over_budget_streak
            else f"none (longest run {streak.length}; a streak is {STREAK_MIN}+)"
        )
        + "; [bold]compaction storm[/] "
        + (
            f"[yellow]{storm.length} consecutive compacting requests ({storm.first_request}-"
            f"{storm.last_request})[/]"
            if refusals.storm
            else f"none (longest run {storm.length}; a storm is {STORM_MIN}+)"
        )
    )
    if refusals.repairs:
        parts = [
            f"{kind} in {c.views:,} view(s), {c.distinct:,} distinct"
            for kind, c in refusals.repairs.items()
        ]
        console.print(f"[bold]Repairs the views needed[/] {escape('; '.join(parts))}")
    else:
        console.print("[bold]Repairs the views needed[/] none")
    if refusals.refused:
        rows: list[list[Cell]] = [
            [str(v.request), escape("; ".join(v.reasons))] for v in refusals.refused[:REFUSED_ROWS]
        ]
        if len(refusals.refused) > REFUSED_ROWS:
            rows.append(["", Note(f"… {len(refusals.refused) - REFUSED_ROWS} more")])
        columns = [Column("request"), Column("why", kind="text")]
        console.print(fit_table(columns, rows, title="Refused views (all in --json)"))


def render_left_out(
    console: Console,
    history: Sequence[Mapping[str, Any]],
    left_out: Sequence[int],
    drops: Sequence[Drop],
    *,
    family: str | None,
) -> None:
    """What a view left out, message by message, with the request each one left at."""
    if not left_out:
        return
    index = PositionIndex()
    index.sync(history)
    left_at = {d.position: d for d in drops if d.change == LEFT}
    columns = [
        Column("pos"), Column("role", kind="word"), _call_column(), Column("tokens"),
        Column("left at", kind="word"), Column("level", drop=1), _line_column(),
    ]  # fmt: skip
    rows: list[list[Cell]] = []
    for position in left_out[:LEFT_OUT_ROWS]:
        message = history[position]
        d = left_at.get(position)
        rows.append([
            str(position), escape(str(message.get("role", ""))),
            escape(call_text(index.tool(message), index.call_argument(message))),
            f"{estimate_message_tokens(message, family=family):,}",
            f"req {d.request}" if d else "", str(d.level) if d else "", escape(first_line(message)),
        ])  # fmt: skip
    if len(left_out) > LEFT_OUT_ROWS:
        more = f"… {len(left_out) - LEFT_OUT_ROWS} more (replay --json lists every drop)"
        rows.append(["", "", "", "", "", "", Note(more)])
    title = f"What this view left out ({len(left_out):,} messages)"
    console.print(fit_table(columns, rows, title=title))


def render_why(console: Console, position: int, lines: Sequence[str]) -> None:
    console.print(f"[bold]Message {position}[/] " + escape(lines[0]))
    for line in lines[1:]:
        console.print("  " + escape(line))


def render_sweep(console: Console, rows: Sequence[SweepRow]) -> None:
    if not rows:
        return
    keys = list(rows[0].setting)
    share = "window" if rows[0].share_of == SHARE_OF_WINDOW else "budget"
    # Headers on two lines: three swept keys still fit 80 columns once the cost columns are
    # left out (the budget first; the base-price input last).
    columns = [
        *(Column(SWEPT_KEYS[k][0].removeprefix("--").replace("-", "\n", 1)) for k in keys),
        Column("priced\ninput", drop=5), Column("at the\nmarkers", drop=4),
        Column("kept\nmean", drop=3), Column("kept\nmin", drop=2),
        Column("in\ncontext", drop=6), Column("find-\nable", drop=7), Column("compactions"),
        Column("prefix\nbreaks"), Column(f"peak of\n{share}"), Column("refused"),
        Column("budget", drop=1),
    ]  # fmt: skip
    table_rows: list[list[Cell]] = [
        [
            *(_value(r.setting[k]) for k in keys), f"{r.priced_input_tokens:,.0f}",
            f"{r.priced_at_markers:,.0f}", f"{r.kept_mean:.1%}", f"{r.kept_min:.1%}",
            _share(r.evidence_kept), _share(r.evidence_findable),
            f"{r.compactions:,}", f"{r.prefix_breaks:,}", f"{r.peak_share:.1%}",
            f"{r.refused_views:,}", f"{r.budget:,}",
        ]
        for r in sorted(rows, key=lambda row: row.priced_input_tokens)
    ]  # fmt: skip
    caption = (
        "cheapest first. priced input: base-price tokens of the replayed views through a "
        "simulated 5-minute cache (requests a minute apart), every message cached / only at "
        f"the provider's markers ({PRICED_BASIS}; replay also shows a log's recorded price); "
        "kept: share of the history's tokens a view sent; in context: of the strings the "
        "next calls used from earlier results and prompts, the share the views still showed; "
        "findable: the share they showed or named in the notice's map of what was left out; "
        "prefix breaks: views whose prefix is "
        f"not the previous view's; peak: largest view plus overhead over the {share}; refused: "
        "views a provider would refuse"
    )
    title = f"Sweep: {len(rows)} setting(s), one replay each"
    console.print(fit_table(columns, table_rows, title=title, caption=caption))


def _share(share: float | None) -> str:
    return "—" if share is None else f"{share:.1%}"


def _value(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
