"""The tables of what the views dropped, what a provider would refuse, and a sweep's rows.

Numbers and headers never wrap or get cut (``no_wrap``); text columns (tool, first line) give
way with an ellipsis, and optional columns are dropped on a narrow console.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import estimate_message_tokens
from .drops import LEFT, Drop, PositionIndex, first_line
from .refusals import STORM_MIN, STREAK_MIN, RefusalReport
from .report import ReplayReport
from .sweep import SHARE_OF_WINDOW, SWEPT_KEYS, SweepRow

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
_NARROW = 100
"""Below this width the optional columns go."""


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False)


def _number(table: Table, name: str) -> None:
    table.add_column(name, justify="right", no_wrap=True)


def _text(table: Table, name: str, *, ratio: int | None = None, min_width: int = 4) -> None:
    table.add_column(name, no_wrap=True, overflow="ellipsis", ratio=ratio, min_width=min_width)


def _tokens(d: Drop) -> str:
    return f"{d.tokens_before:,} → {d.tokens_after:,}"


def render_drops(console: Console, report: ReplayReport) -> None:
    """Per request that changed the history's place in the view: the largest changes."""
    if not report.drops:
        return
    by_request: dict[int, list[Drop]] = {}
    for d in report.drops:
        by_request.setdefault(d.request, []).append(d)
    wide = console.width >= _NARROW
    table = _table("What each compaction dropped (largest first; all in --json)")
    for name in ("req", "pos"):
        _number(table, name)
    table.add_column("change", no_wrap=True)
    table.add_column("role", no_wrap=True)
    _text(table, "tool", min_width=4)
    _number(table, "tokens")
    if wide:
        _number(table, "level")
    _text(table, "first line", ratio=1, min_width=10)
    for request, drops in by_request.items():
        shown = sorted(drops, key=lambda d: (-d.tokens_before, d.position))[:DROP_ROWS]
        for i, d in enumerate(shown):
            level = [str(d.level)] if wide else []
            table.add_row(
                str(request) if i == 0 else "", str(d.position), d.change, d.role,
                escape(d.tool or ""), _tokens(d), *level, escape(d.first_line),
            )  # fmt: skip
        if len(drops) > len(shown):
            counts = _counts(drops)
            filler = [""] * (len(table.columns) - 1)
            filler[-1] = f"… {len(drops) - len(shown)} more ({counts})"
            table.add_row("", *filler)
        table.rows[-1].end_section = True
    console.print(table)


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
        table = _table("Refused views (all in --json)")
        _number(table, "request")
        _text(table, "why", ratio=1, min_width=20)
        for verdict_row in refusals.refused[:REFUSED_ROWS]:
            table.add_row(str(verdict_row.request), escape("; ".join(verdict_row.reasons)))
        if len(refusals.refused) > REFUSED_ROWS:
            table.add_row("", f"… {len(refusals.refused) - REFUSED_ROWS} more")
        console.print(table)


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
    wide = console.width >= _NARROW
    table = _table(f"Left out of this view ({len(left_out):,} messages)")
    _number(table, "pos")
    table.add_column("role", no_wrap=True)
    _text(table, "tool", min_width=4)
    _number(table, "tokens")
    _number(table, "left at")
    if wide:
        _number(table, "level")
    _text(table, "first line", ratio=1, min_width=10)
    for position in left_out[:LEFT_OUT_ROWS]:
        message = history[position]
        d = left_at.get(position)
        level = [str(d.level) if d else ""] if wide else []
        table.add_row(
            str(position), str(message.get("role", "")), escape(index.tool(message) or ""),
            f"{estimate_message_tokens(message, family=family):,}",
            f"req {d.request}" if d else "", *level, escape(first_line(message)),
        )  # fmt: skip
    if len(left_out) > LEFT_OUT_ROWS:
        filler = [""] * (len(table.columns) - 1)
        filler[-1] = f"… {len(left_out) - LEFT_OUT_ROWS} more (replay --json lists every drop)"
        table.add_row("", *filler)
    console.print(table)


def render_why(console: Console, position: int, lines: Sequence[str]) -> None:
    console.print(f"[bold]Message {position}[/] " + escape(lines[0]))
    for line in lines[1:]:
        console.print("  " + escape(line))


def render_sweep(console: Console, rows: Sequence[SweepRow]) -> None:
    if not rows:
        return
    keys = list(rows[0].setting)
    share = "window" if rows[0].share_of == SHARE_OF_WINDOW else "budget"
    table = _table(f"Sweep: {len(rows)} setting(s), one replay each")
    for key in keys:
        _number(table, SWEPT_KEYS[key][0].removeprefix("--"))
    for name in ("compactions", "cache breaks", f"peak of {share}", "refused"):
        _number(table, name)
    if console.width >= _NARROW:
        _number(table, "budget")
    for r in rows:
        budget = [f"{r.budget:,}"] if console.width >= _NARROW else []
        table.add_row(
            *(_value(r.setting[k]) for k in keys), f"{r.compactions:,}", f"{r.cache_breaks:,}",
            f"{r.peak_share:.1%}", f"{r.refused_views:,}", *budget,
        )  # fmt: skip
    table.caption = (
        "cache breaks: views whose prefix is not the previous view's; peak: largest view plus "
        f"overhead over the {share}; refused: views a provider would refuse"
    )
    console.print(table)


def _value(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
